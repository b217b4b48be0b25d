"""`codemode eval --ray` without the `ray` extra is a usage error naming the extra."""

import importlib.util
from pathlib import Path

from rich.console import Console

from codemode._eval import EXIT_USAGE, run_command

ROOT = Path(__file__).resolve().parents[3]


def test_without_ray_the_option_is_a_usage_error_naming_the_extra(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "ray" else find_spec(name, *args))
    errors = Console(record=True, width=200)
    status = run_command([ROOT / "fixtures" / "attacks" / "fsr-open-family.py"],
                         ROOT / "fixtures" / "policies" / "default.toml", tier=None, jobs=1,
                         as_json=False, html_path=None, console=Console(), err_console=errors,
                         ray_address="local")
    assert status == EXIT_USAGE
    assert errors.export_text().strip() == "error: --ray needs Ray: pip install 'codemode[ray]'"
