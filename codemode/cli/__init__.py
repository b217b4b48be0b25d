"""The `codemode` command line (`codemode --help`): `main` is the console script, `app` the
typer application, `DEMO_PROGRAM` the program `codemode demo` runs.

Each command lives in a module of its own: `_app` (the application and the top-level
commands), `_run` and `_render` (running a program and drawing its card), `_report` (the
`--json` report), `_log` and `_log_show` (`codemode log`), `_cache` (`codemode cache`),
`_help` (help at any width), `_stop` (signals) and `_quiet` (warnings).
"""

from ._app import DEMO_PROGRAM, app, main

__all__ = ["DEMO_PROGRAM", "app", "main"]
