import re
m = re.search(r"(\d+)-(\d+)", "tel: 555-1234 end")
print(m, m.group(0), m.groups(), m.span(1), m.start(2), m.end())
print(re.findall(r"\b\w{3}\b", "the cat sat on a mat"), re.split(r"[,;]\s*", "a, b;c"), re.sub(r"(\w+)@", r"<\1>@", "me@x you@y"))
print(re.fullmatch(r"\d+", "123"), re.fullmatch(r"\d+", "12a"), re.match(r"a", "ba"))
