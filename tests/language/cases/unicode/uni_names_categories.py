# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
import unicodedata as u
for c in "aÅ1½€\u0301😀\u00a0中":
    print(hex(ord(c)), u.name(c, "?"), u.category(c), u.bidirectional(c), u.east_asian_width(c), u.combining(c))
print(u.lookup("SNOWMAN"), u.numeric("½"), u.decimal("٣"), u.unidata_version)
