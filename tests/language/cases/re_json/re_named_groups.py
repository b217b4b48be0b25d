import re
p = re.compile(r"(?P<key>\w+)=(?P<val>[^;]*)")
print([m.groupdict() for m in p.finditer("a=1;b=two;c=")])
print(p.sub(lambda m: f"{m['val']}={m['key']}", "x=y"), p.pattern, p.groups, p.groupindex)
