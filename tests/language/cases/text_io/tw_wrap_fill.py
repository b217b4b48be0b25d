import textwrap
s = "The quick brown fox jumps over the lazy dog and keeps on running far away."
print(textwrap.wrap(s, 20)); print(textwrap.fill(s, 25, initial_indent="> ", subsequent_indent="  "))
print(textwrap.shorten(s, 30), textwrap.shorten("hello   world", 11, placeholder="~"))
