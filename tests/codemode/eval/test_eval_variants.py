"""Generated variants (`codemode/_eval/_variants.py`): deterministic for a seed, each keeps
its parent's oracles and names its rewrite, every rewrite keeps what a program prints,
placeholders survive, and an escaped variant is written out as a standalone case."""

import contextlib
import io
import random
import sys
from pathlib import Path

import pytest

from codemode._eval import CaseResult, evaluate, load_corpus, parse_case
from codemode._eval._variants import (
    REWRITES,
    generate,
    rewrite_program,
    variant,
    variants_of,
    write_escapes,
)
from codemode._policy.policy import Policy

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "fixtures" / "attacks"

# Touches every construct the rewrites act on: module attributes, private names, strings,
# expression statements, assignments, a function, a class, a try, a final expression.
PROGRAM = '''\
import json
import math


class Box:
    def __init__(self, v):
        self._v = v

    def get(self):
        return self._v


def double(x):
    y = x * 2
    return y


box = Box(3)
total = math.floor(2.5) + double(box.get())
print("total", total, json.dumps({"k": [1, 2]}))
try:
    print({}["missing"])
except KeyError as exc:
    print("no key", exc)
names = [n.upper() for n in ("a", "b")]
print(names, type(box).__name__, box._v)
total
'''


def native(source):
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<p>", "exec"), namespace)
    return out.getvalue()


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_every_rewrite_keeps_what_the_program_prints(rewrite):
    text = rewrite_program(PROGRAM, rewrite, random.Random(1))
    if rewrite == "async":                      # asyncio.run needs no running loop: fine here
        assert "async def cm_variant_main" in text
    assert text is not None and text != PROGRAM
    assert native(text) == native(PROGRAM)


# ast.unparse quotes a nested f-string as PEP 701 allows from Python 3.12.
FORMAT_SPEC = "f\"{'':{" if sys.version_info < (3, 12) else "f'{'':{"


@pytest.mark.parametrize("rewrite, construct", [
    ("getattr", "getattr(box, 'get')"), ("runtime-names", "''.join(["),
    ("vars", "vars(math)['floor']"), ("dict", "math.__dict__['floor']"),
    ("hex-strings", "bytes.fromhex('746f74616c')"), ("char-codes", "map(chr, ["),
    ("comprehension", "for cm_i in [0]][0]"), ("lambda", "(lambda: "),
    ("generator", "next((") , ("class-body", "class CmPayload0:"),
    ("except-handler", "except LookupError:"), ("format-spec", FORMAT_SPEC),
    ("eval-string", "eval(compile("), ("exec-string", "exec(compile("),
    ("async", "asyncio.run(cm_variant_main())"),
])
def test_each_rewrite_uses_its_construct(rewrite, construct):
    assert construct in rewrite_program(PROGRAM, rewrite, random.Random(1))


def test_a_rewrite_with_nothing_to_change_or_not_compiling_gives_no_variant():
    assert rewrite_program("x = 1\n", "getattr", random.Random(0)) is None
    assert rewrite_program("def (:\n", "lambda", random.Random(0)) is None
    # inside the async wrapper a star import is a SyntaxError: skipped, not shipped
    assert rewrite_program("from json import *\nprint(dumps(1))\n", "async",
                           random.Random(0)) is None


def test_placeholders_are_never_encoded_or_split():
    source = 'print(open("@@CANARY_READ@@/x").read(), "plain text")\nNone\n'
    for seed in range(20):
        for rewrite in ("hex-strings", "char-codes", "exec-string", "eval-string"):
            text = rewrite_program(source, rewrite, random.Random(seed))
            assert "@@CANARY_READ@@" in text, rewrite


@pytest.mark.slow
def test_generator_is_deterministic_for_a_seed_and_variants_keep_their_parents_oracles(tmp_path):
    cases = load_corpus([CORPUS])
    first = generate(cases, per_case=3, seed=11)
    assert first == generate(cases, per_case=3, seed=11)
    assert [c.id for c in first] != [c.id for c in generate(cases, per_case=3, seed=12)]
    assert len(cases) + len(first) >= 300
    parents = {c.id: c for c in cases}
    for made in first:
        parent_id, rewrite = made.id.split("--")
        parent = parents[parent_id]
        assert rewrite in REWRITES
        assert (made.category, made.oracles, made.expect_error, made.labels) == (
            parent.category, parent.oracles, parent.expect_error, parent.labels)
        assert made.placeholders() == parent.placeholders()
        assert len(made.phases) == len(parent.phases)
        assert f"# variant: {rewrite} of {parent_id}, seed 11" in made.source
        file = tmp_path / f"{made.id}.py"
        file.write_text(made.source)
        reread = parse_case(file)                  # a standalone case file as it stands
        assert (reread.id, reread.category, reread.oracles, reread.labels) == (
            made.id, made.category, made.oracles, made.labels)
    assert any(made.labels for made in first)           # the data-flow cases' variants


def test_an_escaped_variant_is_written_as_a_standalone_case(tmp_path):
    [parent] = load_corpus([CORPUS / "intro-dynamic-attribute-names.py"])
    [made] = variants_of(parent, per_case=1, seed=0)
    results = [CaseResult(id=made.id, category=made.category, path=made.path,
                          oracles=made.oracles, outcome="escaped", reason="x"),
               CaseResult(id=parent.id, category=parent.category, path=parent.path,
                          oracles=parent.oracles, outcome="escaped", reason="x")]
    written = write_escapes([parent, made], results, tmp_path / "escapes")
    assert written == [tmp_path / "escapes" / f"{made.id}.py"]
    assert load_corpus([tmp_path / "escapes"])[0].source == made.source


@pytest.mark.slow
def test_variants_run_in_the_sandbox_and_match_native_output(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "prog.py").write_text("# id: prog\n# category: benign\n"
                                    "# oracle: stdout-equals-reference\n" + PROGRAM)
    [parent] = load_corpus([corpus])
    made = [variant(parent, r, 0) for r in ("runtime-names", "async", "exec-string")]
    data = Policy.load(ROOT / "fixtures" / "policies" / "default.toml")
    results = evaluate(made, data)
    assert [(r.id, r.outcome) for r in results] == [
        ("prog--runtime-names", "ran-ok"), ("prog--async", "ran-ok"),
        ("prog--exec-string", "ran-ok")]
