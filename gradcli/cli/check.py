"""``gradcli check``: run the gradient checks that model files register with ``@gradcli.check``."""
from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback

import click

from ..errors import BadInput
from ..render.json import dumps
from .common import JsonCommand, console, fail

#: Checks are run with a progress bar (stderr, terminals only, never with --json) once a run has
#: taken this many seconds and has more checks to go.
PROGRESS_AFTER_S = 1.0


@click.command(cls=JsonCommand)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-k", "pattern", default=None, metavar="PATTERN",
              help="Only checks whose name (or file) contains PATTERN, case-insensitive, as pytest's -k: "
                   "\"mlp and not bias\", \"softmax or attention\".")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout and nothing else.")
@click.option("--junit", "junit", default=None, metavar="FILE", help="Also write JUnit XML to FILE (atomically).")
@click.option("--mode", type=click.Choice(["auto", "full", "fast"]), default=None,
              help="vjp checks: the full Jacobian, random cotangents, or full up to ~10^4 entries (auto, default).")
@click.option("--seed", type=int, default=None, help="Seed for inputs given as shapes (default 0).")
@click.option("--rtol", type=float, default=None, help="Relative tolerance for every check.")
@click.option("--atol", type=float, default=None, help="Absolute tolerance for every check.")
@click.option("--taylor", is_flag=True, default=False,
              help="Run the Taylor-remainder test on every check and show its fitted slope (2: right, 1: wrong; "
                   "order=2 checks also the slope with the Hessian term, 3: right).")
def check(paths, pattern, as_json, junit, mode, seed, rtol, atol, taylor):
    """Run the gradient checks registered with @gradcli.check in model files or folders of them.

    \b
    Examples:
      gradcli check model.py
      gradcli check models/ -k "mlp and not bias"
      gradcli check models/ --json > report.json
      gradcli check models/ --junit gradcli.xml
      gradcli check models/ --taylor

    Folders are searched recursively for .py files that use gradcli (hidden folders, __pycache__ and
    virtual environments are skipped). Defaults may come from [tool.gradcli] in pyproject.toml; the
    options here override them.

    Exit codes: 0 every check passed; 1 a check failed, raised or was inconclusive; 2 a file cannot be
    imported or registers no checks, or a bad option; 3 a gradient does not exist at the inputs
    (a kink, outside the domain) and nothing failed.
    """
    started = time.perf_counter()
    try:
        cli_defaults = _check_options(paths, junit, seed, rtol, atol, mode)
        if taylor:
            cli_defaults["taylor"] = True
        defaults = {**_load_defaults(paths[0]), **cli_defaults}
    except BadInput as exc:
        fail(exc, as_json)

    from ..checks.collect import collect
    from ..checks.result import CheckReport

    # model files may print; stdout is for the report (and with --json, for one document only)
    with contextlib.redirect_stdout(sys.stderr):
        specs, errors = collect(paths, pattern)
    if pattern and not specs and not errors:
        fail(BadInput(f"no check matches -k {pattern!r}"), as_json)
    for e in errors:
        click.echo(f"error: {e['file']}: {e['message']}", err=True)
    show = not as_json and sys.stderr.isatty() and len(specs) > 1
    with contextlib.redirect_stdout(sys.stderr):
        results = run_all(specs, defaults, console(stderr=True) if show else None, started)
    report = CheckReport(checks=results, errors=errors)
    seconds = time.perf_counter() - started
    if junit:
        from ..render.junit import junit_xml, write_atomic

        try:
            write_atomic(junit, junit_xml(report, seconds))
        except OSError as exc:
            fail(BadInput(f"--junit {junit}: {exc.strerror or exc}"), as_json)
    if as_json:
        click.echo(dumps(report.to_dict()))
    else:
        from ..render.check import render_check_report

        console().print(render_check_report(report, seconds,
                                            taylor=bool(defaults.get("taylor"))))
    sys.exit(report.exit_code)


def _check_options(paths, junit, seed, rtol, atol, mode) -> dict:
    for p in paths:
        if not os.path.exists(p):
            raise BadInput(f"{p}: no such file or directory")
    if rtol is not None and not rtol >= 0 or atol is not None and not atol >= 0:
        raise BadInput("--rtol and --atol must be non-negative numbers")
    if junit is not None:
        folder = os.path.dirname(os.path.abspath(junit))
        if os.path.isdir(junit) or not os.path.isdir(folder):
            raise BadInput(f"--junit {junit}: not a file in an existing folder")
    given = {"mode": mode, "seed": seed, "rtol": rtol, "atol": atol}
    return {k: v for k, v in given.items() if v is not None}


def _load_defaults(path) -> dict:
    """[tool.gradcli] from the pyproject.toml that governs ``path`` (a bad table is BadInput, exit 2)."""
    from ..checks.config import load_defaults

    try:
        return dict(load_defaults(path) or {})
    except BadInput:
        raise
    except (ValueError, OSError) as exc:  # the message names the pyproject.toml
        raise BadInput(str(exc)) from None


def run_all(specs, defaults: dict, progress_console=None, started: float | None = None) -> list:
    """Run every spec, in order; a progress bar appears on ``progress_console`` once the run is slow."""
    started = time.perf_counter() if started is None else started
    results, bar, task = [], None, None
    try:
        for i, spec in enumerate(specs):
            if progress_console is not None and bar is None and time.perf_counter() - started > PROGRESS_AFTER_S:
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

                bar = Progress(TextColumn("checking"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                               TextColumn("{task.description}"), TimeElapsedColumn(),
                               console=progress_console, transient=True)
                bar.start()
                task = bar.add_task("", total=len(specs), completed=i)
            if bar is not None:
                bar.update(task, description=spec.name)
            results.append(run_one(spec, defaults))
            if bar is not None:
                bar.update(task, completed=i + 1)
    finally:
        if bar is not None:
            bar.stop()
    return results


def run_one(spec, defaults: dict):
    """One check; the result carries the collection's (qualified) name and display path."""
    from ..checks.result import CheckResult
    from ..checks.runner import run_check

    t0 = time.perf_counter()
    try:
        result = run_check(spec, dict(defaults))
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
