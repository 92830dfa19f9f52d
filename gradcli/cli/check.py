"""``gradcli check``: run the gradient checks that model files register with ``@gradcli.check``."""
from __future__ import annotations

import contextlib
import os
import sys
import time

import click

from gradcli.checks import session
from gradcli.core.errors import BadInput
from gradcli.render.check import render_check_report
from gradcli.render.json import dumps
from gradcli.render.junit import junit_target, junit_xml, write_atomic
from gradcli.cli.common import JsonCommand, console, fail, progress_console

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
        cli_defaults = _check_options(paths, seed, rtol, atol, mode)
        if taylor:
            cli_defaults["taylor"] = True
        # refused before any model is imported, let alone checked
        junit_path = junit_target(junit, [*paths, *session.find_files(paths)[0]]) if junit is not None else None
        defaults = {**session.load_defaults(paths[0]), **cli_defaults}
    except BadInput as exc:
        fail(exc, as_json)

    specs, errors, report = [], [], None
    with session.watching_sigint():
        try:
            # model files may print; stdout is for the report (and with --json, for one document only)
            with contextlib.redirect_stdout(sys.stderr):
                specs, errors = session.collect(paths, pattern)
            if pattern and not specs and not errors:
                fail(BadInput(f"no check matches -k {pattern!r}"), as_json)
            for e in errors:
                click.echo(f"error: {e['file']}: {e['message']}", err=True)
            show = not as_json and sys.stderr.isatty() and len(specs) > 1
            with contextlib.redirect_stdout(sys.stderr):
                report = run_report(specs, defaults, errors, progress_console() if show else None, started)
        except KeyboardInterrupt:  # the user's Ctrl-C while a file was being imported
            report = session.CheckReport(checks=[], errors=errors, interrupted=True, planned=len(specs))
    seconds = time.perf_counter() - started
    if report.interrupted:
        click.echo(f"interrupted: {len(report.checks)} of {len(specs)} checks ran", err=True)
    if junit_path is not None:
        try:
            write_atomic(junit_path, junit_xml(report, seconds))
        except OSError as exc:
            fail(BadInput(f"--junit {junit}: {exc.strerror or exc}"), as_json)
    if as_json:
        click.echo(dumps(report.to_dict()))
    else:
        console().print(render_check_report(report, seconds, taylor=bool(defaults.get("taylor"))))
    sys.exit(report.exit_code)


def _check_options(paths, seed, rtol, atol, mode) -> dict:
    for p in paths:
        if not os.path.exists(p):
            raise BadInput(f"{p}: no such file or directory")
    if rtol is not None and not rtol >= 0 or atol is not None and not atol >= 0:
        raise BadInput("--rtol and --atol must be non-negative numbers")
    given = {"mode": mode, "seed": seed, "rtol": rtol, "atol": atol}
    return {k: v for k, v in given.items() if v is not None}


def run_report(specs, defaults: dict, errors=(), progress_console=None, started: float | None = None):
    """Run every spec (gradcli.checks.session) with a progress bar on ``progress_console`` once it is slow
    -> CheckReport."""
    started = time.perf_counter() if started is None else started
    with _Progress(progress_console, started, len(specs)) as progress:
        return session.run_checks(specs, defaults, errors, progress)


def run_all(specs, defaults: dict, progress_console=None, started: float | None = None) -> list:
    """The results of :func:`run_report` alone."""
    return run_report(specs, defaults, (), progress_console, started).checks


class _Progress:
    """A progress bar on ``progress_console`` once the run has taken PROGRESS_AFTER_S and has more to go."""

    def __init__(self, progress_console, started: float, total: int):
        self.console, self.started, self.total = progress_console, started, total
        self.bar = self.task = None

    def __enter__(self):
        return self

    def __call__(self, i: int, spec) -> None:
        if self.console is None:
            return
        if self.bar is None and time.perf_counter() - self.started > PROGRESS_AFTER_S:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("checking"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TextColumn("{task.description}"), TimeElapsedColumn(),
                                console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.total, completed=i)
        if self.bar is not None:
            self.bar.update(self.task, completed=i, description=spec.name)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
