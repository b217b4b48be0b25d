"""The run: the reserved `run_code` tool and everything one run of a program needs.

`run_code` (`CodeMode`, the tool's body) and `render` (its value and failures as the model
reads them), `dispatch` (each sub-call through the pipeline with the parent token) with
`subcalls` (what is kept of each, its binding rejection back) and `approvals` (the run's
approval channel), `stubs` (the typed signatures the model and the program see) from
`schema_types` (JSON Schema as Python types), `description` (run_code's description, the
stubs module), `labels` (where a run's data came from), `replay`, `resumed` and `seal`
(paused runs recorded, resumed, their records sealed), `rejections` (the codes a program
sees).

Empty on purpose: importing one module loads no other (`codemode` loads on first use).
"""
