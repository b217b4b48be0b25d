"""MCP on both sides: the client of upstream servers (`client`, their values in `values`,
the command line's toolsets in `toolsets`) and `codemode serve`, which serves `run_code`
to MCP clients (`serve`, with `calls` remembering what its approvals need).

Empty on purpose: importing one module loads no other (`codemode` loads on first use).
"""
