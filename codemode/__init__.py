"""codemode: run model-written Python in a wasmtime sandbox, with every tool call governed
by one pipeline (DESIGN.md §1). Re-exports the pipeline's public names."""

from pipeline import *  # noqa: F403  (the pipeline's public API is part of ours)
from pipeline import __all__ as _pipeline_all

from ._rejections import rejection_code
from ._run_code import RUN_CODE, CodeMode, CodeRunFailed

__all__ = sorted({*_pipeline_all, "CodeMode", "CodeRunFailed", "RUN_CODE", "rejection_code"})
