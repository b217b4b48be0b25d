for s in ["a", "abc", "abcdef"]:
    print(f"[{s:*^7}] [{s:>5}] [{s:<5}] [{s:.2}]")
print(f"[{3:=+6}] [{-3:06}] [{'x'!r:>6}]")
