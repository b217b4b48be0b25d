"""The wheel: one top-level import name, with the files the package reads at run time."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out), str(ROOT)], check=True, timeout=600)
    [path] = out.glob("codemode-*.whl")
    with zipfile.ZipFile(path) as archive:
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
