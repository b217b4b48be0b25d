"""The wheel: one top-level import name, with the files the package reads at run time."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out), str(ROOT)], check=True, timeout=600)
    [path] = out.glob("codemode-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel(wheel_path: Path) -> set[str]:
    with zipfile.ZipFile(wheel_path) as archive:
        return set(archive.namelist())


@pytest.mark.slow
def test_the_only_top_level_names_are_codemode_and_its_dist_info(wheel):
    top = {name.split("/")[0] for name in wheel}
    [dist_info] = top - {"codemode"}
    assert top == {"codemode", dist_info}
    assert dist_info.startswith("codemode-") and dist_info.endswith(".dist-info")


@pytest.mark.slow
def test_the_layers_are_inside_the_package(wheel):
    for layer in ("pipeline", "sandbox", "fixtures"):
        assert f"codemode/{layer}/__init__.py" in wheel, layer
    assert "codemode/py.typed" in wheel
    assert "codemode/pipeline/py.typed" not in wheel  # one marker covers the subpackages


@pytest.mark.slow
def test_the_files_read_at_run_time_are_inside(wheel):
    guest = {f"codemode/sandbox/{path.relative_to(ROOT / 'sandbox').as_posix()}"
             for path in (ROOT / "sandbox" / "guest").rglob("*.py")}
    assert guest and guest <= wheel                      # built into the component on first use
    assert "codemode/sandbox/wit/world.wit" in wheel
    assert "codemode/fixtures/toolset.py" in wheel       # `codemode demo`


@pytest.mark.slow
def test_no_bytecode_is_packed(wheel):
    assert not {name for name in wheel if "__pycache__" in name or name.endswith(".pyc")}


@pytest.mark.slow
def test_the_installed_cli_finds_the_demo_program(wheel_path, tmp_path):
    # The wheel unpacked as site-packages would hold it, imported from outside the checkout:
    # `codemode demo` reads its program from inside the package, not from the checkout.
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel_path) as archive:
        archive.extractall(site)
    check = ("import codemode.cli as cli, pathlib, sys; "
             "assert pathlib.Path(cli.__file__).is_relative_to(sys.argv[1]), cli.__file__; "
             "print(cli.DEMO_PROGRAM.is_file(), cli.DEMO_PROGRAM.is_relative_to(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", check, str(site)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True True\n"


def test_the_installed_environment_imports_only_codemode(tmp_path):
    # However this environment installed the project (CI: `pip install -e .`, hatch's exact
    # editable mode; or a wheel), only `codemode` is importable from outside the checkout:
    # the folders at the repository root are not top-level packages that could shadow others.
    check = (
        "import importlib.util, json, sys\n"
        "import codemode.fixtures.toolset, codemode.pipeline, codemode.sandbox\n"
        "print(json.dumps({\n"
        "    'leaked': [n for n in ('sandbox', 'pipeline', 'fixtures', 'tests', 'benchmarks')\n"
        "               if importlib.util.find_spec(n) is not None],\n"
        "    'layers': [m.__file__ for m in (codemode.pipeline, codemode.sandbox)],\n"
        "}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    import json

    found = json.loads(done.stdout)
    assert found["leaked"] == []
    assert [Path(p).parent.name for p in found["layers"]] == ["pipeline", "sandbox"]
    assert all(Path(p).parent.parent.name == "codemode" for p in found["layers"])


# ---- the Python versions we claim --------------------------------------------------------

def _ci_pythons():
    """.ci/pythons.py, loaded as a module (it is CI's script, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_pythons", ROOT / ".ci" / "pythons.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_classifiers_and_readme_name_exactly_the_versions_requires_python_admits():
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    admitted = [f"3.{minor}" for minor in _ci_pythons().supported_minors()]
    classified = [c.rsplit(" ", 1)[1] for c in project["classifiers"]
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert admitted and classified == admitted
    assert sys.version_info[:2] in {(3, int(v.split(".")[1])) for v in admitted}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = f"Python {', '.join(admitted[:-1])} or {admitted[-1]} (CPython; `pip` refuses"
    assert said in readme


def test_ci_finds_this_interpreter_and_tests_the_oldest_and_newest_whole():
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "pythons.py")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    versions = [version for version, _, _ in rows]
    assert versions == sorted(versions, key=lambda v: int(v.split(".")[1]))
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in versions
    assert [suite for _, _, suite in rows] == (
        ["whole"] if len(rows) == 1 else ["whole", *["fast"] * (len(rows) - 2), "whole"])
    assert "requires-python admits" in done.stderr
