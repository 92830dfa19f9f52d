"""One run of gradcli checks in this process: paths and defaults in, a CheckReport out.

``gradcli check`` (in each model process, gradcli.checks.process.worker) and the pytest plugin both run checks
through here, so the two agree on the defaults (``[tool.gradcli]``, then the caller's options over
them), on what an internal error is, and on when a run stops (the user's Ctrl-C, never a model's
``sys.exit``; see gradcli.checks.process.interrupt). The pytest plugin and the Python API run the model's code
here, in the caller's process; only ``gradcli check`` isolates it (gradcli.checks.process.isolated).
"""
from __future__ import annotations

import time
import traceback
from typing import Callable

from gradcli.core.errors import BadInput
from gradcli.checks import config
from gradcli.checks.collect import check_pattern, collect, find_files, needs_extra
from gradcli.checks.process.interrupt import is_user_interrupt
from gradcli.core.signals import interrupted, watching_signals
from gradcli.checks.result import CheckReport, CheckResult
from gradcli.checks.runner import run_check

__all__ = ["CheckReport", "check_pattern", "collect", "find_files", "load_defaults", "needs_extra", "run_checks",
           "run_one", "watching_signals"]


def load_defaults(path) -> dict:
    """``[tool.gradcli]`` from the pyproject.toml that governs ``path``; a bad table is BadInput (exit 2)."""
    try:
        return dict(config.load_defaults(path) or {})
    except BadInput:
        raise
    except (ValueError, OSError) as exc:  # the message names the pyproject.toml
        raise BadInput(str(exc)) from None


def run_one(spec, defaults: dict) -> CheckResult:
    """One check; the result carries the collection's (qualified) name and display path."""
    t0 = time.perf_counter()
    try:
        result = run_check(spec, dict(defaults))
    except MemoryError as exc:  # the check's inputs or Jacobian do not fit: the check's size, not a bug
        result = CheckResult(name=spec.name, file=spec.file, line=spec.line, kind=spec.kind, status="error",
                             message=f"out of memory: {exc or 'MemoryError'}; check smaller inputs, or "
                                     "mode='fast' for a large output")
    except Exception as exc:  # noqa: BLE001 - the runner reports user errors itself; this is gradcli's own bug
        result = CheckResult(name=spec.name, file=spec.file, line=spec.line, kind=spec.kind, status="error",
                             message=f"internal error in gradcli: {type(exc).__name__}: {exc} "
                                     "(please report it with the traceback below)",
                             traceback="".join(traceback.format_exception(exc)))
    result.name, result.file = spec.name, spec.file
    if not result.line:
        result.line = spec.line
    if not result.seconds:
        result.seconds = time.perf_counter() - t0
    return result


def run_checks(specs, defaults: dict, errors=(), progress: Callable | None = None) -> CheckReport:
    """Run every spec in order -> CheckReport (with the collection ``errors``). ``progress(i, spec)`` is
    called before check ``i``. The user's Ctrl-C stops the run: the report then holds the checks that
    finished and says it was interrupted."""
    results, stopped = [], False
    for i, spec in enumerate(specs):
        if progress is not None:
            progress(i, spec)
        try:
            results.append(run_one(spec, defaults))
        except KeyboardInterrupt as exc:
            if not is_user_interrupt(exc):
                raise
            stopped = True
            break
        if interrupted():  # the model caught the user's KeyboardInterrupt itself: stop all the same
            stopped = True
            break
    return CheckReport(checks=results, errors=list(errors), interrupted=stopped, planned=len(specs))
