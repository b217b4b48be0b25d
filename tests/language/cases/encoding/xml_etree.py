# restricted: refused (module xml is not importable)
import xml.etree.ElementTree as ET
root = ET.fromstring('<r a="1"><c n="x">t1</c><c n="y"/><d>é</d></r>')
print(root.tag, root.attrib, [c.get("n") for c in root.findall("c")], root.find("d").text, root.findtext("c"))
e = ET.SubElement(root, "new", k="v"); e.text = "<&>"
print(ET.tostring(root, encoding="unicode"))
ET.indent(root); print(ET.tostring(root, encoding="unicode"))
try: ET.fromstring("<a><b></a>")
except ET.ParseError as e: print(e)
