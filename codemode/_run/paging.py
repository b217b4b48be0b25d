"""`read_output`: the function a program of a `CodeMode(output_paging=True)` session reads
the whole output of an earlier run with, when the sandbox cut it (docs/codemode.md,
"Output over its limit"). Answered on the host from `CodeMode.full_output` (a host-answered
function of `dispatch.SubCallDispatcher`, as discovery's are), never through the pipeline:
it reads only what this `CodeMode`'s own runs printed, runs no tool, and needs no approval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET

from codemode.sandbox import (
    FullOutput,
    ParamSpec,
    SubCall,
    SubCallErr,
    SubCallOk,
    SubCallOutcome,
    ToolSpec,
)

READ_OUTPUT = "codemode/read_output"
"""Its wire name: apart from any tool's, as discovery's are (the program calls it
`read_output`)."""

PAGE_CHARS = 20_000
"""Characters one `read_output` call returns at most (the `size` it is given is bounded)."""

READ_OUTPUT_SPEC = ToolSpec(
    name=READ_OUTPUT, alias="read_output", accepts_extra=False,
    doc=("read_output(handle, part='stdout', offset=0, size=20000) -> str: characters "
         "[offset, offset+size) of the whole output of an earlier run whose output was cut; "
         "part is 'stdout', 'stderr' or 'value' (the value as JSON text); '' past the end."),
    params=(ParamSpec(name="handle", required=True), ParamSpec(name="part"),
            ParamSpec(name="offset"), ParamSpec(name="size")))
"""The binding programs get when paging is on."""

_JSON = msgspec.json.Encoder()


def paging_line(handle: str, part: str = "stdout") -> str:
    """The sentence the model reads after the cut line: the handle and how to read more
    (`part`: the first part that was cut)."""
    return (f"[the whole output is kept as handle {handle!r}: in a later program, "
            f"read_output({handle!r}, part={part!r}, offset=0, size={PAGE_CHARS}) returns a "
            f"slice of it as text (part 'stdout', 'stderr' or 'value' as JSON; at most "
            f"{PAGE_CHARS} characters a call).]")


def _text(full: FullOutput, part: str) -> str | None:
    if part == "stdout":
        return full.stdout
    if part == "stderr":
        return full.stderr
    return None if full.value is UNSET else _JSON.encode(full.value).decode()


def read_page(find: Callable[[str], FullOutput | None], call_id: int,
              arguments: Any) -> SubCallOutcome:
    """One `read_output` call answered: `SubCallOk` with the slice, or `SubCallErr`
    (`INVALID_ARGS` for a bad argument; `NOT_FOUND` for a handle that is unknown to this
    `CodeMode`, expired, or a part that was not cut)."""
    args = arguments if isinstance(arguments, dict) else {}
    handle, part = args.get("handle"), args.get("part", "stdout")
    offset, size = args.get("offset", 0), args.get("size", PAGE_CHARS)
    if not isinstance(handle, str) or part not in ("stdout", "stderr", "value") or \
            type(offset) is not int or type(size) is not int or offset < 0 or size < 0:
        return SubCallErr(id=call_id, code="INVALID_ARGS", message=(
            "read_output(handle: str, part: 'stdout' | 'stderr' | 'value' = 'stdout', "
            "offset: int >= 0 = 0, size: int >= 0 = 20000)"))
    full = find(handle)
    if full is None:
        return SubCallErr(id=call_id, code="NOT_FOUND", message=(
            f"no cut output is kept under handle {handle!r}: a handle is the run_code call "
            "id named when a run's output was cut, and only the latest runs are kept"))
    text = _text(full, part)
    if text is None:
        return SubCallErr(id=call_id, code="NOT_FOUND", message=(
            f"the {part} of {handle!r} was not cut: the run's own value holds it whole"))
    return SubCallOk(id=call_id, value=text[offset:offset + min(size, PAGE_CHARS)])


def page_reader(find: Callable[[str], FullOutput | None],
                reads: list[dict[str, Any]]) -> Callable[[SubCall], SubCallOutcome]:
    """The answer to a program's `read_output` calls (a `dispatch.HostAnswer`): each call
    is answered by `read_page` and appended to `reads` as `{"handle", "part", "offset",
    "size"}`, the run's record of them."""
    def read(call: SubCall) -> SubCallOutcome:
        if call.invalid is not None:
            return SubCallErr(id=call.id, code="INVALID_ARGS", message=call.invalid)
        args = call.arguments if isinstance(call.arguments, dict) else {}
        reads.append({"handle": args.get("handle"), "part": args.get("part", "stdout"),
                      "offset": args.get("offset", 0), "size": args.get("size", PAGE_CHARS)})
        return read_page(find, call.id, call.arguments)

    return read
