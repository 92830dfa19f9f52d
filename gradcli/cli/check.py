"""``gradcli check``: run the gradient checks that model files register with ``@gradcli.check``."""
from __future__ import annotations

import codecs
import contextlib
import os
import sys
import time

import click

from gradcli.checks import config

from gradcli.checks.process import isolated

from gradcli.checks import session
from gradcli.core.signals import stop_exit_status, stop_message, stops_deferred, stops_resumed, watching_signals
from gradcli.checks.process.worker import TIME_LIMIT_S
from gradcli.core import options as option_values
from gradcli.core.errors import BadInput
from gradcli.verdict.exit_codes import exit_code
from gradcli.render.check import render_check_report, stopped_text
from gradcli.render.json import dumps
from gradcli.render.junit import RUN_CASE, junit_target, junit_xml, stopped_junit_target, write_atomic
from gradcli.cli.common import JsonCommand, console, fail, progress_console

#: Checks are run with a progress bar (stderr, terminals only, never with --json) once a run has
#: taken this many seconds and has more checks to go.
PROGRESS_AFTER_S = 1.0


class _CheckCommand(JsonCommand):
    reports_stops = True  # check() reports a stop as this run's, in its --json and --junit


@click.command(cls=_CheckCommand)
@click.argument("paths", nargs=-1, default=(".",), metavar="[PATH]...")  # none: the current folder, as pytest
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
@click.option("--order", type=click.IntRange(1, 2), default=None,
              help="2: also check second order (the gradient's derivative; a framework's double backward) "
                   "for every check that does not set order= itself.")
@click.option("--autocast", type=click.Choice(["bf16", "fp16"]), default=None,
              help="torch checks: run forward and backward under torch.autocast in this dtype, with float32 "
                   "inputs and parameters (other checks ignore it).")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help=f"Seconds one check (or one model file's import) may run before it is stopped and reported "
                   f"as an error (default {TIME_LIMIT_S:g}; also timeout in [tool.gradcli]).")
def check(paths, pattern, as_json, junit, mode, seed, rtol, atol, taylor, order, autocast, timeout):
    """Run the checks that model files register with @gradcli.check.

    Each PATH is a model file or a folder of them.

    \b
    Examples:
      gradcli check model.py
      gradcli check models/ -k "mlp and not bias"
      gradcli check models/ --json > report.json
      gradcli check models/ --junit gradcli.xml
      gradcli check models/ --taylor --timeout 300

    Folders are searched recursively for .py files that use gradcli (hidden folders, __pycache__ and
    virtual environments are skipped). Defaults may come from [tool.gradcli] in pyproject.toml; the
    options here override them. Each model file is imported and checked in a process of its own, so
    that a crash, os._exit or output written around sys.stdout there cannot end or corrupt the run.

    Exit codes: 0 every check passed; 1 a check failed, raised, crashed, timed out or was inconclusive;
    2 a file cannot be imported or registers no checks, or a bad option; 3 a gradient does not exist at
    the inputs (a kink, outside the domain) and nothing failed; 130, 143, 129 stopped by SIGINT (Ctrl-C),
    SIGTERM, SIGHUP, with the checks that ran reported.
    """
    started = time.perf_counter()
    junit_path, defaults = None, {}
    with watching_signals():
        try:
            with stops_resumed():  # a stop from the moment gradcli started is reported here, as this run's
                junit_path = _junit_path(junit, paths, as_json)
                try:
                    defaults = _defaults(paths, pattern, seed, rtol, atol, mode, timeout, taylor, autocast, order)
                except BadInput as exc:
                    _refuse(exc, as_json, junit_path)
                limit = defaults.pop("timeout", TIME_LIMIT_S)
                show = not as_json and sys.stderr.isatty()
                with contextlib.redirect_stdout(sys.stderr):  # model files may print; stdout is for the report
                    report = run_files_report(paths, pattern, defaults, limit,
                                              progress_console() if show else None, started)
        except KeyboardInterrupt:  # a stop signal before the first model process started
            report = session.CheckReport(checks=[], interrupted=True, planned=0, unreached=None)
            if junit is not None and junit_path is None:
                junit_path = stopped_junit_target(junit, paths)
        with stops_deferred():  # the report and the JUnit file are written whole
            _finish(report, started, pattern, as_json, junit, junit_path, bool(defaults.get("taylor")))


def _junit_path(junit, paths, as_json: bool) -> str | None:
    """The file --junit replaces, refused before any model is imported, let alone checked."""
    if junit is None:
        return None
    try:
        return junit_target(junit, [*paths, *session.find_files(paths)[0]])
    except BadInput as exc:
        fail(exc, as_json)


def _defaults(paths, pattern, seed, rtol, atol, mode, timeout, taylor, autocast, order) -> dict:
    """The check options of this run: [tool.gradcli], then the command line's over them."""
    cli_defaults = _check_options(paths, pattern, seed, rtol, atol, mode, timeout)
    if taylor:
        cli_defaults["taylor"] = True
    if autocast:
        cli_defaults["autocast"] = autocast
    if order is not None:
        cli_defaults["order"] = order
    return {**session.load_defaults(paths[0]), **cli_defaults}


def _finish(report, started, pattern, as_json, junit, junit_path, taylor) -> None:
    if pattern and not report.checks and not report.errors and not report.interrupted:
        _refuse(BadInput(f"no check matches -k {pattern!r}"), as_json, junit_path)
    seconds = time.perf_counter() - started
    code = (stop_exit_status() or report.exit_code) if report.interrupted else report.exit_code
    try:
        if report.interrupted:
            click.echo(f"interrupted: {stopped_text(report, 'ran')}", err=True)
        unwritten = None
        if junit_path is not None:
            try:
                write_atomic(junit_path, junit_xml(report, seconds))
            except OSError as exc:  # a full disk: the report is still shown, then the exit says it
                unwritten = f"--junit {junit}: {exc.strerror or exc}"
        if as_json:
            click.echo(dumps(report.to_dict()))
        else:
            console().print(render_check_report(report, seconds, taylor=taylor))
        if unwritten is not None:
            click.echo(f"error: {unwritten}", err=True)
            code = exit_code("bad_input")
        if stop_exit_status() and not report.interrupted:
            # the signal came while the report was written (deferred, so it is whole): every check ran,
            # but the caller asked this run to stop, and the exit status must say so
            click.echo(stop_message(), err=True)
    except OSError:  # a SIGHUP's terminal is gone: the exit status still tells
        if not (report.interrupted or stop_exit_status()):
            raise
    sys.exit(stop_exit_status() or code)


def _check_options(paths, pattern, seed, rtol, atol, mode, timeout) -> dict:
    for p in paths:
        if not os.path.exists(p):
            raise BadInput(f"{p}: no such file or directory")
    option_values.tolerance(rtol, "--rtol")
    option_values.tolerance(atol, "--atol")
    option_values.seed(seed, "--seed")
    if timeout is not None and not config.is_time_limit(timeout):
        raise BadInput("--timeout: expected a positive number of seconds")
    if pattern:
        session.check_pattern(pattern)
    given = {"mode": mode, "seed": seed, "rtol": rtol, "atol": atol, "timeout": timeout}
    return {k: v for k, v in given.items() if v is not None}


def _refuse(err: BadInput, as_json: bool, junit_path: str | None):
    """:func:`fail`, and a JUnit file that says why nothing ran: an earlier run's file must not stay
    behind to be taken for this one's."""
    if junit_path is not None:
        try:
            write_atomic(junit_path, junit_xml(session.CheckReport(errors=[{"file": RUN_CASE,
                                                                            "message": err.message}])))
        except OSError:
            pass
    fail(err, as_json)


def run_files_report(paths, pattern, defaults: dict, limit: float, progress_console=None,
                     started: float | None = None):
    """Check the files under ``paths``, each in its own process (gradcli.checks.process.isolated), the model
    processes' output and the file errors on stderr, a progress bar once it is slow -> CheckReport."""
    started = time.perf_counter() if started is None else started
    # the bar counts model files, whose number is known from the start; their checks are known only as
    # each file is imported, so a bar over checks would see its total grow
    with _Progress(progress_console, started, 0, "files") as progress:
        relay = _Relay(progress)
        try:
            return isolated.run_files(paths, pattern, defaults, limit, on_output=relay,
                                      on_error=lambda e: progress.write(f"error: {e['file']}: {e['message']}\n"),
                                      progress=progress)
        finally:
            relay.flush()


class _Relay:
    """What model processes write, to stderr as it comes (UTF-8 split across reads is joined first); while a
    progress bar is shown, whole lines only, written above the bar."""

    def __init__(self, progress):
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.progress, self.pending = progress, ""

    def __call__(self, data: bytes) -> None:
        text = self.pending + self.decoder.decode(data)
        cut = text.rfind("\n") + 1 if self.progress.shown else len(text)
        self.pending = text[cut:]
        if cut:
            self.progress.write(text[:cut])

    def flush(self) -> None:
        text, self.pending = self.pending + self.decoder.decode(b"", final=True), ""
        if text:
            self.progress.write(text)


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

    def __init__(self, progress_console, started: float, total: int, unit: str = "checks"):
        self.console, self.started, self.total, self.unit = progress_console, started, total, unit
        self.bar = self.task = None

    @property
    def shown(self) -> bool:
        return self.bar is not None

    def write(self, text: str) -> None:
        """``text`` on stderr: above the bar while one is shown (the bar's line is cleared first and drawn
        again below), else as it is."""
        if self.bar is None:
            sys.stderr.write(text)
            sys.stderr.flush()
            return
        self.bar.console.print(text, end="", markup=False, highlight=False, emoji=False, soft_wrap=True)
        self.bar.refresh()

    def __enter__(self):
        return self

    def __call__(self, i: int, spec, total: int | None = None) -> None:
        """Before a check (a CheckSpec, or its name): ``i`` of ``total`` done, counted in ``self.unit``."""
        if self.console is None:
            return
        if total is not None:
            self.total = total
        name = getattr(spec, "name", spec)
        if self.bar is None and time.perf_counter() - self.started > PROGRESS_AFTER_S and i < self.total:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            # no refresh thread: model processes are forked from this one, and a fork must not copy
            # a thread that may hold the console's lock
            count = TextColumn(f"{{task.completed}}/{{task.total}} {self.unit}")
            self.bar = Progress(TextColumn("checking"), BarColumn(), count, TextColumn("{task.description}"),
                                TimeElapsedColumn(), console=self.console, transient=True, auto_refresh=False)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.total, completed=i)
        if self.bar is not None:
            self.bar.update(self.task, completed=i, total=self.total, description=name)
            self.bar.refresh()

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
