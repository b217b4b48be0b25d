import re
print(re.findall(r"\w+(?=!)", "hi! yo? ok!"), re.findall(r"(?<=\$)\d+", "$10 and $20"), re.findall(r"(\w)\1", "aabbcd"))
print(re.sub(r"(?i)(?<!\w)cat", "dog", "Cat concat cat"), re.subn(r"a", "b", "aaa", count=2))
