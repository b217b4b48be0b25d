import string
print(string.ascii_letters, string.digits, string.punctuation, repr(string.whitespace))
print(string.capwords("hello   big world"))
