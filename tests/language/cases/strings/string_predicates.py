for s in ["abc", "ABC", "123", "½", "²", "abc123", " ", "", "Title Case", "٣"]:
    print(repr(s), s.isalpha(), s.isdigit(), s.isnumeric(), s.isdecimal(), s.isalnum(), s.isspace(), s.istitle(), s.isupper())
