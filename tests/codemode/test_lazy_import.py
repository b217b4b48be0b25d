"""`import codemode` stays light: the MCP SDK (and pydantic under it) and wasmtime load only
when a name that needs them is first used; what a first `run_code` does not use stays
unloaded."""

import subprocess
import sys

import codemode


def _modules_after(statement: str) -> set[str]:
    probe = f"{statement}\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return set(out.split())


def test_import_codemode_loads_neither_mcp_nor_wasmtime():
    loaded = _modules_after("import codemode")
    assert not {"mcp", "pydantic", "wasmtime", "codemode.pipeline"} & loaded


def test_a_sandbox_run_loads_neither_the_pipeline_nor_the_restricted_tier():
    loaded = _modules_after(
        "from codemode.sandbox import WasmSandbox, RunRequest, SubCallReply\n"
        "assert WasmSandbox().run(RunRequest(code='x = 1\\nx'),\n"
        "                         lambda b: SubCallReply()).value == 1")
    assert "wasmtime" in loaded
    assert not {"codemode.pipeline", "RestrictedPython", "jsonschema", "asyncio",
                "importlib.metadata", "mcp"} & loaded


def test_a_pipeline_name_loads_the_pipeline_on_first_use():
    loaded = _modules_after("import codemode\nassert codemode.Session.__name__ == 'Session'")
    assert "codemode.pipeline" in loaded


def test_code_mode_loads_the_sandbox_but_not_mcp():
    loaded = _modules_after("from codemode import CodeMode, Policy, Session")
    assert "wasmtime" in loaded
    assert not {"mcp", "pydantic"} & loaded


def test_a_first_run_code_result_loads_no_log_file_backend_seal_or_waiter_pool():
    # what a first `run_code` with an in-memory log never uses: the log's file backends
    # (and sqlite3), the seal's hashing (hashlib loads OpenSSL) and the threads that wait on
    # sandboxes without `submit` (the wasm tier has it)
    loaded = _modules_after(
        "import asyncio\nfrom codemode import CodeMode, Session\n"
        "from codemode.fixtures.toolset import builtin_tools\n"
        "s = Session(tools=builtin_tools(), log=None)\nCodeMode(s)\n"
        "r = asyncio.run(s.call('run_code', {'code': 'x = 1\\nx'}))\n"
        "assert r.value['result'] == 1, r")
    assert "codemode._run.run_code" in loaded
    assert not {"sqlite3", "codemode.pipeline.log._sqlite", "codemode.pipeline.log._jsonl",
                "codemode.pipeline.log._read", "hashlib", "hmac", "secrets",
                "concurrent.futures.thread"} & loaded
    # nor the file-store guard, the execute wrappers or the clock-and-random tape
    assert not {"codemode.pipeline._fs_guard", "codemode.pipeline._wrappers",
                "codemode.sandbox._tape"} & loaded


def test_the_pipeline_guard_and_wrappers_load_on_first_use():
    loaded = _modules_after(
        "from codemode.pipeline import FsGate, ReplaceIfVersion, retry_wrapper\n"
        "import codemode, codemode.pipeline as p\n"
        "assert FsGate.__module__ == 'codemode.pipeline._fs_guard'\n"
        "assert retry_wrapper.__module__ == 'codemode.pipeline._wrappers'\n"
        "assert codemode.read_before_edit is p.read_before_edit\n"
        "assert {'FsGate', 'timeout_wrapper'} <= set(dir(p))")
    assert {"codemode.pipeline._fs_guard", "codemode.pipeline._wrappers"} <= loaded


def test_a_run_with_a_tape_loads_the_recorder_and_records():
    loaded = _modules_after(
        "from codemode.sandbox import WasmSandbox, RunRequest, SubCallReply, Tape\n"
        "from codemode.sandbox import WallClockRead\n"
        "out = WasmSandbox().run(RunRequest(code='import time\\ntime.time()', tape=Tape()),\n"
        "                        lambda b: SubCallReply())\n"
        "assert out.status == 'ok', out\n"
        "assert isinstance(out.tape.entries[-1], WallClockRead), out.tape")
    assert "codemode.sandbox._tape" in loaded


def _cli_modules_after(*argv: str) -> set[str]:
    """The modules `codemode ARGV` has loaded when it exits (printed by an atexit hook)."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print(' '.join(sys.modules), file=sys.stderr))\n"
             f"sys.argv = ['codemode', *{list(argv)!r}]\n"
             "from codemode.cli import main\nmain()")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stderr.split())


def test_cli_help_loads_neither_the_sandbox_nor_the_pipeline():
    loaded = _cli_modules_after("--help")
    assert "typer" in loaded
    assert not {"wasmtime", "msgspec", "asyncio", "codemode.sandbox", "codemode.pipeline",
                "codemode.cli._log_show", "codemode._policy.policy", "importlib.metadata", "mcp",
                "RestrictedPython", "jsonschema"} & loaded


def test_cli_run_loads_no_policy_log_reader_mcp_or_restricted_tier(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("x = 1\nprint(x)\n")
    loaded = _cli_modules_after("run", str(program))
    assert {"wasmtime", "codemode._run.run_code"} <= loaded
    assert not {"codemode._policy.policy", "codemode.cli._log_show", "codemode.pipeline.log._read",
                "codemode._mcp.client", "mcp", "pydantic", "RestrictedPython", "jsonschema",
                "codemode.sandbox._restricted", "codemode._version", "rich.console"} & loaded


def test_the_log_file_backends_load_on_first_use():
    loaded = _modules_after("from codemode.pipeline import log\n"
                            "assert log.SqliteLog.__name__ == 'SqliteLog'")
    assert {"sqlite3", "codemode.pipeline.log._sqlite"} <= loaded
    assert "codemode.pipeline.log._jsonl" not in loaded


def test_every_exported_name_resolves():
    for name in codemode.__all__:
        assert getattr(codemode, name) is not None, name
    assert set(codemode.__all__) <= set(dir(codemode))


def test_an_unknown_name_is_an_attribute_error():
    try:
        codemode.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("codemode.NoSuchThing resolved")
