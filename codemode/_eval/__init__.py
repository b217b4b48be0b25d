"""The policy evaluator (docs/design.md §7): run a corpus of benign and hostile programs under a
policy and sandbox tier, check every oracle of `fixtures/attacks/README.md`, and report each
case as escaped, host-affected, limit, blocked, ran-ok or wrong-output, with its cost.

    _corpus.py     finding cases, headers, placeholders, phases
    _canaries.py   per-run secrets, the canary tree, the loopback listener
    _messages.py   the evaluator <-> worker protocol
    worker.py      the worker process: runs cases, checks leaks, tools, host state
    _observe.py    what the worker watches (dispatch traffic, host modules, the bridge)
    _native.py     the native CPython reference run of benign programs
    _slot.py       a job slot: its worker, hard timeouts, memory sampling, evaluator oracles
    _runner.py     the cases spread over job slots in threads, or over Ray actors
    _ray.py        the job slots as actors of a Ray cluster (`--ray ADDRESS`)
    _classify.py   oracles -> outcome
    _report.py     rich table, JSON, HTML
    _command.py    the `codemode eval` command
"""

from ._classify import FAILING, OUTCOMES, classify
from ._command import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EvalUsageError, prepare, run_command
from ._corpus import Case, CorpusError, discover, load_corpus, parse_case, substitute
from ._messages import Fired, PhaseReport
from ._report import EvalReport, to_html, to_json
from ._runner import evaluate
from ._slot import CaseResult

__all__ = [
    "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "FAILING", "OUTCOMES", "Case", "CaseResult",
    "CorpusError", "EvalReport", "EvalUsageError", "Fired", "PhaseReport", "classify",
    "discover", "evaluate", "load_corpus", "parse_case", "prepare", "run_command",
    "substitute", "to_html", "to_json",
]
