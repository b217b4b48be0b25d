"""README.md and docs/ say what is true: every Python example and shell command in them runs,
prints what the page claims, and every file they cite is in the repository.

How a page claims things (fenced blocks, by their info string):

- ```python: run as a script in a fresh process (working directory: a scratch folder that
  links to the repository's top-level folders). If the next block is ```output, the
  script's stdout must match it.
- ```python program: a program for `run_code`, run with `codemode run - --builtin` (the
  demo toolset); it must complete, and a following ```output block is its stdout.
- ```sh: each command (``\\``-continued lines joined, ``#`` comments dropped) must exit 0.
- ```console: ``$ COMMAND`` lines; the lines after one, up to the next ``$``, are its
  stdout. A command whose expected output ends with ``[exit N]`` must exit N.
- In expected output, a line ``...`` matches any number of lines and ``...`` inside a line
  matches any text.
- Any block whose info string holds ``no-run`` is shown, not run; the page must say why on
  the line before it (a test checks there is a sentence there).

Two commands of the README's quick start are not run as written: their
``python3 -m venv .venv && . .venv/bin/activate && pip install ... &&`` prefix is dropped
(this test already runs inside such an environment), and the test command itself is
checked to be the one `.ci/run` calls instead of being run again from inside the suite.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEST_COMMAND = "python -m pytest -q -n auto"
_VENV_PREFIX = re.compile(r"^python3 -m venv \.venv && \. \.venv/bin/activate && "
                          r"pip install [^&]+&& ")
COMMAND_TIMEOUT_S = 900          # generous: the machine may be shared and loaded


@dataclass(frozen=True)
class Block:
    page: Path
    line: int                    # 1-based line of the opening fence
    info: str
    text: str
    before: str                  # the non-blank line before the fence

    @property
    def kind(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def runs(self) -> bool:
        return "no-run" not in self.info.split()

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        match = re.match(r"^```(.*)$", lines[i])
        if not match:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        before = next((text for text in reversed(lines[:start]) if text.strip()), "")
        found.append(Block(page, start + 1, match.group(1).strip(), "\n".join(body) + "\n",
                           before))
        i += 1
    return found


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


def _matches(expected: str, actual: str) -> bool:
    """Whole-text match where a line `...` stands for any lines and `...` in a line for
    any text."""
    pattern = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            pattern.append(r"(?:.*\n)*?")
        else:
            pattern.append(".*?".join(map(re.escape, line.split("..."))) + r"\n")
    return re.fullmatch("".join(pattern), actual.rstrip("\n") + "\n") is not None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder that looks like the checkout (its top-level entries linked), so
    the examples' relative paths work and whatever they write lands here."""
    work = tmp_path_factory.mktemp("docs")
    for entry in ROOT.iterdir():
        if entry.name not in {".git", ".venv"} and not entry.name.startswith("."):
            (work / entry.name).symlink_to(entry)
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    env.pop("FORCE_COLOR", None)
    return env


_RAN: dict[tuple[str, str | None], subprocess.CompletedProcess[str]] = {}


def _shell(command: str, cwd: Path,
           stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` with bash; a command two pages show alike runs once."""
    key = (command, stdin)
    if key not in _RAN:
        _RAN[key] = subprocess.run(["bash", "-c", command], cwd=cwd, env=_env(), text=True,
                                   capture_output=True, timeout=COMMAND_TIMEOUT_S,
                                   input=stdin if stdin is not None else "")
    return _RAN[key]


def _commands(block: Block) -> list[str]:
    joined = block.text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def _console_steps(block: Block) -> list[tuple[str, str]]:
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"{block.where()}: output before the first `$` command")
    return [(command, "\n".join(out)) for command, out in steps]


def _as_run(command: str) -> str | None:
    """The command the test runs for `command` (see the module docstring), or None."""
    command = _VENV_PREFIX.sub("", command)
    return None if command == TEST_COMMAND else command


def _check(command: str, expected: str | None, workdir: Path, where: str,
           stdin: str | None = None) -> None:
    runnable = _as_run(command)
    if runnable is None:
        return
    status = 0
    if expected is not None:
        claimed = re.search(r"\n?\[exit (\d+)\]\s*$", expected)
        if claimed:
            status, expected = int(claimed.group(1)), expected[:claimed.start()]
    done = _shell(runnable, workdir, stdin)
    assert done.returncode == status, (
        f"{where}: `{command}` exited {done.returncode}, expected {status}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    if expected is not None:
        assert _matches(expected, done.stdout), (
            f"{where}: `{command}` printed\n{done.stdout}\nthe page claims\n{expected}")


def _cases(kind: str, *flags: str) -> list[Block]:
    return [b for b in ALL_BLOCKS if b.kind == kind and b.runs
            and set(flags) == set(b.info.split()[1:])]


def _next_block(block: Block) -> Block | None:
    same = [b for b in ALL_BLOCKS if b.page == block.page]
    index = same.index(block)
    return same[index + 1] if index + 1 < len(same) else None


@pytest.mark.parametrize("block", _cases("python"), ids=Block.where)
def test_python_example_runs_and_prints_what_the_page_claims(block: Block,
                                                             workdir: Path) -> None:
    script = workdir / f"example_{block.page.stem}_{block.line}.py"
    script.write_text(block.text, encoding="utf-8")
    following = _next_block(block)
    expected = following.text if following is not None and following.kind == "output" else None
    _check(f"python {shlex.quote(script.name)}", expected, workdir, block.where())


@pytest.mark.parametrize("block", _cases("python", "program"), ids=Block.where)
def test_program_runs_in_the_sandbox_and_prints_what_the_page_claims(block: Block,
                                                                   workdir: Path) -> None:
    following = _next_block(block)
    expected = following.text if following is not None and following.kind == "output" else None
    _check("codemode run - --builtin --no-table", expected, workdir, block.where(),
           stdin=block.text)


@pytest.mark.slow
@pytest.mark.parametrize("block", _cases("sh"), ids=Block.where)
def test_shell_commands_run(block: Block, workdir: Path) -> None:
    for command in _commands(block):
        _check(command, None, workdir, block.where())


@pytest.mark.parametrize("block", _cases("console"), ids=Block.where)
def test_console_session_prints_what_the_page_claims(block: Block, workdir: Path) -> None:
    for command, expected in _console_steps(block):
        _check(command, expected, workdir, block.where())


def test_output_blocks_follow_a_python_example() -> None:
    for block in ALL_BLOCKS:
        if block.kind == "output":
            previous = [b for b in ALL_BLOCKS if b.page == block.page and b.line < block.line]
            assert previous and previous[-1].kind == "python", block.where()


def test_blocks_not_run_say_why() -> None:
    for block in ALL_BLOCKS:
        if not block.runs:
            assert block.before.rstrip().endswith((".", ":")), (
                f"{block.where()}: a no-run block needs a sentence before it saying why")


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert TEST_COMMAND in readme
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# ---- what the pages cite -----------------------------------------------------------------

_CITED = re.compile(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*(?:\.(?:md|py|toml|wit|txt|json|html)|/))`")
_OUTSIDE = re.compile(r"\.\./shared|\bDESIGN\.md\b|\bPIPELINE\.md\b")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_cite_only_files_in_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not _OUTSIDE.search(text), f"{page.name} cites a file outside the repository"
    missing = []
    for cited in set(_CITED.findall(text)):
        if cited.startswith(("http", "~")) or "*" in cited:
            continue
        if "/" not in cited.rstrip("/") and not cited.endswith(".md"):
            continue            # a bare name (`session.db`) is what an example creates
        if not any((base / cited).exists() for base in (ROOT, page.parent)):
            missing.append(cited)
    assert not missing, f"{page.name} cites files that are not in the repository: {missing}"


# Files an example writes into the checkout: `--html F`, `--log F`, `> F` with a relative path.
_WRITTEN = re.compile(r"(?:--html|--log|>)\s*([A-Za-z0-9_.-]+\.(?:html|jsonl|json|db|py|txt))\b")


def test_the_files_the_examples_write_into_the_checkout_are_ignored():
    # Running the examples from the repository root must leave `git status` and `ruff check .`
    # as they were (the pause example's program is not a lint target).
    written = {name for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
               for name in _WRITTEN.findall(path.read_text(encoding="utf-8"))}
    assert {"report.html", "session.jsonl", "nap.py", "nap.jsonl"} <= written
    for name in sorted(written):
        for candidate in (name, f"{name}.lock") if name.endswith(".jsonl") else (name,):
            done = subprocess.run(["git", "check-ignore", "-q", candidate], cwd=ROOT,
                                  capture_output=True, timeout=60)
            assert done.returncode == 0, f"{candidate} is not git-ignored"
