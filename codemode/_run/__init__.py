"""The run: the reserved `run_code` tool and everything one run of a program needs.

`run_code` (`CodeMode`, the tool's body), `dispatch` (each sub-call through the pipeline
with the parent token, its binding rejection back), `stubs` (the typed signatures the model
and the program see), `labels` (where a run's data came from), `replay` and `seal` (paused
runs resumed, their records sealed), `rejections` (the codes a program sees).

Empty on purpose: importing one module loads no other (`codemode` loads on first use).
"""
