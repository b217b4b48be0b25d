# xfail: the sandbox puts call_tool, tools, help and the ToolCallError family in the program's globals (by design), so dir() at module level is not CPython's
# restricted: xfail (the program's globals hold call_tool, tools, help, the ToolCallError family and _print)
x = 1
print(sorted(k for k in dir() if not k.startswith("__")))
