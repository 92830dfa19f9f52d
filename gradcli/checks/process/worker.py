"""The model process: one model file imported and its checks run in a child of ``gradcli check``.

gradcli.checks.process.model_process forks this process for each model file (gradcli.checks.process.isolated
runs them one after another), so that nothing the model does can end or corrupt the run: ``os._exit``, a
segfault or a SIGKILL ends only this process, and output written around ``sys.stdout`` (``os.write(1, ...)``,
``sys.__stdout__``, a subprocess, a late thread) lands on the pipe that the parent copies to its stderr, never
on the parent's stdout. Results go back over a second pipe as pickled messages (see :class:`Channel`), never
through the model's output:

``("registered", [(name, file), ...], [meta, ...])`` after the import: every check the file registers
(to make names unique across files) and the ones selected by ``-k``; then ``("start", i)`` and
``("result", i, CheckResult)`` for each selected check from ``job.skip`` on; ``("done",)`` at the end.
An import that fails sends ``("import_error", entry)`` instead.

Each check (and the import) runs under a time limit: SIGALRM raises :class:`TimedOut` inside whatever
Python code is running, so the report names the model's line; the alarm fires again every second in
case the model swallows it. A process that still does not answer (stuck in C code) is the parent's to
end, GRACE_S seconds after the limit.
"""
from __future__ import annotations

import faulthandler
import io
import os
import pickle
import signal
import struct
import sys
import sysconfig
import time
import traceback
from dataclasses import dataclass, field

from gradcli.checks import collect
from gradcli.checks.process.interrupt import TimedOut
from gradcli.core.signals import STOP_SIGNALS, as_model_process
from gradcli.checks.result import CheckResult
from gradcli.checks.session import run_one
from gradcli.checks.comparisons.under_test import user_traceback

#: The default time limit of one check (and of a model file's import), in seconds.
TIME_LIMIT_S = 60.0
#: How long past the limit a model process that does not answer the alarm gets before it is killed.
GRACE_S = 5.0
#: The model process's exit status when gradcli's own code in it failed (after it said why).
INTERNAL_FAILURE = 70
#: The longest time limit that is one (seconds); beyond it, and setitimer overflows the platform's time_t.
A_YEAR = 365 * 24 * 3600.0
#: How a timed-out check's message ends.
RAISE_THE_LIMIT = "raise the limit with --timeout SECONDS or timeout in [tool.gradcli]"

_HEADER = struct.Struct("!Q")
_LARGEST = 1 << 30
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARIES = tuple(sorted({os.path.realpath(p) for k, p in sysconfig.get_paths().items()
                           if k in ("stdlib", "platstdlib", "purelib", "platlib") and p}))


@dataclass(frozen=True)
class Job:
    """One model file to check in a model process."""

    path: str
    wanted: frozenset = frozenset()  # real paths of every model file in the run (see collect.collect_file)
    pattern: str | None = None  # -k
    defaults: dict = field(default_factory=dict)  # check options ([tool.gradcli], then the command line)
    timeout: float = TIME_LIMIT_S
    skip: int = 0  # selected checks already reported (a new process after one was killed)


class Garbled(ValueError):
    """Bytes on the results pipe that are no message (the model wrote to it)."""


class Channel:
    """Length-prefixed pickles over a pipe: :meth:`send` in the model process, :meth:`feed` in the parent."""

    def __init__(self, fd: int):
        self.fd, self.pending = fd, b""

    def send(self, message) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self.fd, view):]

    def feed(self, data: bytes) -> list:
        """The whole messages that ``data`` completes (Garbled for bytes that are no message)."""
        self.pending += data
        out = []
        while len(self.pending) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.pending)
            if size > _LARGEST:
                raise Garbled("a message larger than any result")
            if len(self.pending) < _HEADER.size + size:
                break
            body = self.pending[_HEADER.size:_HEADER.size + size]
            self.pending = self.pending[_HEADER.size + size:]
            try:
                out.append(pickle.loads(body))
            except Exception as exc:  # noqa: BLE001 - whatever the bytes were, they are not our message
                raise Garbled(f"unreadable message from the model process ({type(exc).__name__})") from None
        return out


def serve(job: Job, channel_fd: int, output_fd: int, faults_fd: int, parent: int) -> None:
    """The model process's whole life (called in the forked child; never returns): fd 0 is /dev/null,
    fds 1 and 2 are ``output_fd``, a fatal signal's Python traceback goes to ``faults_fd``; ``parent``
    is gradcli's pid."""
    status = 0
    channel = Channel(channel_fd)
    try:
        _die_with(parent)
        _take_over_process(output_fd, faults_fd)
        _run(job, channel)
    except BaseException:  # noqa: BLE001 - gradcli's own failure here: say so, then end this process only
        status = INTERNAL_FAILURE
        try:
            channel.send(("internal", traceback.format_exc()))
        except BaseException:  # noqa: BLE001 - the parent is gone or the pipe is: nothing left to tell
            pass
    finally:
        os._exit(status)  # no atexit handler or lingering thread of the model's may keep it alive


def serve_spawned(args: list) -> None:
    """:func:`serve` in a fresh interpreter (model_process spawns one where a fork could not run the
    model): ``args`` are the pickled job in hex, the three fds and gradcli's pid."""
    job = pickle.loads(bytes.fromhex(args[0]))
    channel_fd, output_fd, faults_fd, parent = map(int, args[1:5])
    serve(job, channel_fd, output_fd, faults_fd, parent)


def _die_with(parent: int) -> None:
    # a gradcli killed outright (SIGKILL, a CI runner's timeout) cannot end its model process itself;
    # on Linux the kernel does it then
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # gone already, before the kernel was told
        os._exit(INTERNAL_FAILURE)


_PR_SET_PDEATHSIG = 1


def _take_over_process(output_fd: int, faults_fd: int) -> None:
    as_model_process()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # the parent blocked them to fork
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                              line_buffering=True)
    stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                              line_buffering=True)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = sys.__stdout__ = stdout
    sys.stderr = sys.__stderr__ = stderr
    faulthandler.enable(file=faults_fd, all_threads=False)


def _run(job: Job, channel: Channel) -> None:
    try:
        with _time_limit(job.timeout):
            specs, error = collect.collect_file(job.path, job.wanted)
    except TimedOut as exc:
        where = stuck_at(traceback.extract_tb(exc.__traceback__))
        text = f"cannot import: still running after {job.timeout:g} s" + (f", at {where}" if where else "")
        channel.send(("import_error", collect.file_error(job.path, text + "; " + RAISE_THE_LIMIT)))
        return
    if error:
        channel.send(("import_error", error))
        return
    names = collect.qualified_names([(s.name, s.file) for s in specs])
    chosen = [(i, s, n) for i, (s, n) in enumerate(zip(specs, names))
              if not job.pattern or collect.matches(job.pattern, n, s.file)]
    meta = [{"index": i, "name": n, "file": s.file, "line": s.line, "kind": s.kind} for i, s, n in chosen]
    channel.send(("registered", [(s.name, s.file) for s in specs], meta))
    for k in range(job.skip, len(chosen)):
        _, spec, name = chosen[k]
        channel.send(("start", k))
        started = time.perf_counter()
        try:
            with _time_limit(job.timeout):
                result = run_one(spec, job.defaults)
        except TimedOut as exc:
            result = timed_out(spec, exc, job.timeout, time.perf_counter() - started)
        result.name = name
        _flush()  # the model's output before the result that follows it
        try:
            channel.send(("result", k, result))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # raised before a byte is written
            channel.send(("result", k, CheckResult(
                name=name, file=spec.file, line=spec.line, kind=spec.kind, status="error",
                message=f"internal error in gradcli: its result could not be sent back ({type(exc).__name__}: "
                        f"{exc}); please report it")))
    _flush()
    channel.send(("done",))



def timed_out(spec, exc: TimedOut, limit: float, seconds: float) -> CheckResult:
    """The error of a check that the alarm stopped, with the line it was stuck on."""
    where = stuck_at(traceback.extract_tb(exc.__traceback__))
    text = f"timed out: still running after {limit:g} s"
    text += f", at {where}" if where else " (in gradcli's own work on it, not in the model's code)"
    return CheckResult(name=spec.name, file=spec.file, line=spec.line, kind=spec.kind, status="error",
                       message=f"{text}; {RAISE_THE_LIMIT}", traceback=user_traceback(exc), seconds=seconds)


def stuck_at(frames) -> str:
    """``file:line (source)`` of the innermost frame in the model's own code (not gradcli, the standard
    library or an installed package), else the innermost outside gradcli; "" when every frame is gradcli's.
    ``frames`` are traceback.FrameSummary objects or ``(filename, lineno, name, line)`` tuples, outermost first."""
    frames = [tuple(f) for f in frames]
    outside = [f for f in frames if not in_gradcli(f[0])]
    own = [f for f in outside if not _is_library(f[0])]
    chosen = (own or outside or [None])[-1]
    if chosen is None:
        return ""
    filename, lineno, _, line = chosen
    return f"{collect.display_path(filename)}:{lineno}" + (f" ({line.strip()})" if line and line.strip() else "")


def in_gradcli(filename: str) -> bool:
    """Whether ``filename`` is one of gradcli's own modules."""
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)


def _is_library(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return True
    real = os.path.realpath(filename)
    return any(real.startswith(p + os.sep) for p in _LIBRARIES)


class _time_limit:
    """SIGALRM after ``seconds``, then every second until the block ends (a model that catches
    BaseException is interrupted again)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __enter__(self):
        signal.setitimer(signal.ITIMER_REAL, float(min(self.seconds, A_YEAR)), 1.0)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        return False


def _on_alarm(signum, frame):
    raise TimedOut("the check's time limit ran out")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a model may have replaced or closed them
            pass
