"""MCP on both sides: the client of upstream servers (`client`, over `transport`, with
`recovery` for the lines its SDK cannot parse, `answers` and `values` for what a call
returns, `errors` for what it raises; the command line's toolsets in `toolsets`) and
`codemode serve`, which serves `run_code` to MCP clients (`serve`, with `progress` for what
a call reports while it runs, `approvals` and `resume` for calls that ask, `calls`
remembering what its approvals need).

Empty on purpose: importing one module loads no other (`codemode` loads on first use).
"""
