"""``gradcli check`` with each model file in its own process: nothing a model does ends or corrupts the run.

One forked model process per file (gradcli.checks.process.worker) imports it and runs its checks; this side
reads their results, copies the process's output (fds 1 and 2) to ``on_output`` (the CLI's stderr) and
watches the clock. When a model process ends early (``os._exit``, a segfault, SIGKILL), the checks that
finished are reported as they were, and the check that was running and the file's remaining checks are
``error`` with what happened. When one stops answering past its time limit (stuck in C code), it is
killed, that check is ``error`` (timed out) and a new process runs the rest of the file
(gradcli.checks.process.model_process: one model process, and how it ended).

The user's stop signals (SIGINT, SIGTERM, SIGHUP; gradcli.checks.process.interrupt) reach this process only:
it ends the model process and reports what ran. The pytest plugin runs its model files here too (one
model process per file, with no time limit), so a check that ends its process cannot end pytest's. Without
``os.fork`` (Windows) the checks run in this process, as the Python API always does
(gradcli.checks.session), with no time limit.
"""
from __future__ import annotations

import dataclasses
import importlib
import os

from gradcli.checks import session
from gradcli.checks.collect import check_pattern, file_error, find_files, qualified_names
from gradcli.checks.process.interrupt import is_user_interrupt
from gradcli.checks.process.model_process import AVAILABLE, MAX_UNREAPED, Ending, ModelProcess, reap
from gradcli.checks.result import CheckReport, CheckResult
from gradcli.checks.process.worker import A_YEAR, TIME_LIMIT_S, Job

__all__ = ["AVAILABLE", "run_files"]


def run_files(paths, pattern: str | None, defaults: dict, timeout: float = TIME_LIMIT_S, on_output=None,
              on_error=None, progress=None) -> CheckReport:
    """Check the model files under ``paths`` (``pattern``: ``-k``), one process per file -> CheckReport.

    ``on_output(bytes)`` gets what the model processes write to fds 1 and 2; ``on_error(entry)`` each
    file error as it is found; ``progress(i, name, total)`` is called before each check, ``i`` the model
    files done of ``total`` (known from the start, unlike the number of checks). A stop signal (see
    gradcli.checks.process.interrupt) ends the run: the report holds the checks that finished and says it was
    interrupted."""
    if pattern:
        check_pattern(pattern)
    if not AVAILABLE:
        return _in_this_process(paths, pattern, defaults, on_error, progress)
    timeout = float(min(timeout, A_YEAR))
    files, errors = find_files(paths)
    if files:
        _load_what_every_check_loads()
    run = _Run(errors, on_output, on_error, progress)
    for e in errors:
        run.tell(e)
    wanted = frozenset(os.path.realpath(f) for f in files)
    stopped = False
    try:
        run.files_total = len(files)
        for run.files_done, path in enumerate(files):
            _FileRun(run, Job(path, wanted, pattern, dict(defaults), timeout)).run()
    except KeyboardInterrupt as exc:
        if not is_user_interrupt(exc):
            raise
        stopped = True
    finally:
        reap(run.unreaped)
    report = run.report(stopped)
    report.unreached = len(files) - run.reached
    return report


def _load_what_every_check_loads() -> None:
    # numpy loads these on first use, in every check; loaded here, before the first fork, a model
    # process inherits them instead of spending some 40 ms of each file's run on the imports
    for name in ("numpy.ma", "numpy.random"):
        importlib.import_module(name)


def _in_this_process(paths, pattern, defaults, on_error, progress) -> CheckReport:
    specs, errors = session.collect(paths, pattern)
    for e in errors:
        if on_error is not None:
            on_error(e)
    step = None if progress is None else (lambda i, spec: progress(i, spec.name, len(specs)))
    return session.run_checks(specs, defaults, errors, step)


class _Run:
    """What the run has found so far, in order: checks (with their place among every registered check,
    for names that are unique in the run) and file errors."""

    def __init__(self, errors, on_output, on_error, progress):
        self.errors, self.on_output, self.on_error, self.progress = errors, on_output, on_error, progress
        self.pairs, self.checks, self.planned = [], [], 0
        self.reached = 0  # model files that registered their checks or failed to
        self.files_done = self.files_total = 0
        self.unreaped = []  # killed model processes not yet waited for (at most MAX_UNREAPED)

    def tell(self, entry: dict) -> None:
        if self.on_error is not None:
            self.on_error(entry)

    def error(self, entry: dict) -> None:
        """A model file that registered nothing: it could not be started or imported."""
        self.errors.append(entry)
        self.reached += 1
        self.tell(entry)

    def report(self, stopped: bool) -> CheckReport:
        names = qualified_names(self.pairs)
        checks = []
        for k, result in self.checks:
            result.name = names[k]
            checks.append(result)
        return CheckReport(checks=checks, errors=self.errors, interrupted=stopped, planned=self.planned)


class _FileRun:
    """One model file: a model process, and another for the rest of the file when one had to be killed."""

    def __init__(self, run: _Run, job: Job):
        self.whole, self.job = run, job
        self.meta = None  # the selected checks, as the first process registered them
        self.offset = 0  # where this file's registered checks start in run.pairs
        self.done = 0  # selected checks reported
        self.error = None
        self.reimported_differently = False

    def run(self) -> None:
        while True:
            proc = ModelProcess(dataclasses.replace(self.job, skip=self.done), self.whole.on_output)
            try:
                try:
                    proc.start()
                except OSError as exc:  # no process could be started (EAGAIN, ENOMEM)
                    if self.meta is None:
                        self.whole.error(file_error(self.job.path, f"cannot start a process to check it: {exc}"))
                    else:
                        self.fail_rest(f"not run: no process could be started for it ({exc})")
                    return
                end = proc.follow(self.on_message)
            finally:
                left = proc.close()
                if left is not None:
                    self.whole.unreaped.append(left)
                # reaped as the run goes, not at its end: the ended ones at once, and never more than a few left
                reap(self.whole.unreaped, MAX_UNREAPED)
            if not self.settle(end):
                return

    def on_message(self, message) -> bool:
        """Take one message from the model process; True: stop it."""
        kind = message[0]
        if kind == "registered":
            pairs, meta = message[1], message[2]
            if self.meta is None:
                self.meta, self.offset = meta, len(self.whole.pairs)
                self.whole.pairs.extend(pairs)
                self.whole.planned += len(meta)
                self.whole.reached += 1
            elif [m["name"] for m in meta] != [m["name"] for m in self.meta]:
                self.reimported_differently = True
                return True
        elif kind == "start" and self.whole.progress is not None:
            i = message[1]
            self.whole.progress(self.whole.files_done, self.meta[i]["name"], self.whole.files_total)
        elif kind == "result":
            self.report(message[2])
        elif kind == "import_error":
            self.error = message[1]
        return False

    def report(self, result: CheckResult) -> None:
        m = self.meta[self.done]
        result.file, result.line = m["file"], result.line or m["line"]
        self.whole.checks.append((self.offset + m["index"], result))
        self.done += 1

    def settle(self, end: Ending) -> bool:
        """Report how the process ended; True: start another for the rest of the file."""
        if self.error is not None and self.meta is not None:  # a new process could not import the file again
            self.fail_rest(f"not run: importing the file again (to run the checks after one that was killed) "
                           f"failed: {self.error['message']}")
            return False
        if self.error is not None:
            self.whole.error(self.error)
            return False
        if self.reimported_differently:
            self.fail_rest("not run: the file registered other checks when it was imported again (to run "
                           "the checks after one that was killed)")
            return False
        if self.meta is None:  # it ended while importing the file
            self.whole.error(file_error(self.job.path, "cannot import: " + end.importing(self.job.timeout)))
            return False
        left = len(self.meta) - self.done
        if end.how == "done" or left == 0:
            return False
        current = self.meta[self.done]["name"]
        if end.how == "timed_out" and end.current == self.done:
            self.report(self.failed(self.meta[self.done], end.stuck(self.job.timeout)))
            return self.done < len(self.meta)
        if end.current == self.done:
            self.report(self.failed(self.meta[self.done], end.during(), end.traceback()))
            self.fail_rest(f"not run: the model process {end.what()} during check {current!r}")
        else:
            after = f"after check {self.meta[self.done - 1]['name']!r}" if self.done else "before its first check"
            self.fail_rest(f"not run: the model process {end.what()} {after}", end.traceback())
        return False

    def fail_rest(self, message: str, tb: str = "") -> None:
        while self.done < len(self.meta):
            self.report(self.failed(self.meta[self.done], message, tb))

    @staticmethod
    def failed(m: dict, message: str, tb: str = "") -> CheckResult:
        return CheckResult(name=m["name"], file=m["file"], line=m["line"], kind=m["kind"], status="error",
                           message=message, traceback=tb)
