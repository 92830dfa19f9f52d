"""One model process as gradcli check's process sees it: forked, read, timed, ended, and how it ended.

:class:`ModelProcess` forks gradcli.checks.process.worker.serve for one model file (or starts it in a fresh
interpreter where a fork of this process could not run the model) and follows it: messages from
the results pipe go to a callback, what the process writes on fds 1 and 2 to another (the CLI's stderr),
and a process silent for longer than its time limit and GRACE_S is killed. Each model process leads a
process group of its own, so that ending it ends what it started too, and never gradcli's own group.
:class:`Ending` says how it ended, in the words the report uses.
"""
from __future__ import annotations

import dataclasses
import gc
import linecache
import os
import pickle
import re
import selectors
import signal
import sys
import tempfile
import time
import traceback
import warnings

from gradcli.core.signals import STOP_SIGNALS
from gradcli.checks.process.worker import (
    GRACE_S, INTERNAL_FAILURE, RAISE_THE_LIMIT, Channel, Garbled, Job, in_gradcli, serve, stuck_at)

#: Whether model processes can be forked here (POSIX).
AVAILABLE = hasattr(os, "fork") and hasattr(signal, "setitimer") and hasattr(signal, "pthread_sigmask")
#: The exit status of a process that ended without one to read.
_UNKNOWN = object()
#: The most ended model processes a run leaves unreaped: a zombie still counts against the user's
#: process limit, so a folder of 500 files must not hold 500 of them.
MAX_UNREAPED = 4


@dataclasses.dataclass
class Ending:
    """How a model process ended: ``done``, ``exited`` (early: ``status`` as os.waitstatus_to_exitcode
    gives it), ``timed_out`` (killed: it did not answer the time limit), ``stopped`` (killed: we asked),
    or ``garbled`` (killed: it sent bytes that are no message)."""

    how: str
    current: int | None = None  # the check it was running (None: importing, or between checks)
    status: object = None  # an int (< 0: killed by that signal), or None where there is none to tell
    faults: str = ""  # faulthandler's report of a fatal signal
    internal: str = ""  # gradcli's own traceback, when its code in the model process failed

    def what(self) -> str:
        if self.how == "timed_out":
            return "stopped answering"
        if self.how == "garbled":
            return "sent gradcli unreadable bytes"
        if self.internal and self.status == INTERNAL_FAILURE:
            return "failed inside gradcli (an internal error: please report it with the traceback)"
        if self.status is None or self.status is _UNKNOWN:
            return "ended"
        if self.status < 0:
            try:
                name = signal.Signals(-self.status).name
            except ValueError:
                return f"was killed by signal {-self.status}"
            return f"was killed by signal {-self.status} ({name})"
        return f"exited with status {self.status}"

    def where(self) -> str:
        frames = _fault_frames(self.faults)
        return stuck_at(frames) if frames else ""

    def during(self) -> str:
        where = self.where()
        return f"the model process {self.what()} during this check" + (f", at {where}" if where else "")

    def importing(self, limit: float) -> str:
        if self.how == "timed_out":
            return (f"still running after {limit:g} s and not answering the time limit {GRACE_S:g} s later, "
                    f"so its process was killed; {RAISE_THE_LIMIT}")
        where = self.where()
        return f"the model process {self.what()} while importing the file" + (f", at {where}" if where else "")

    def stuck(self, limit: float) -> str:
        return (f"timed out: still running after {limit:g} s and not answering the time limit {GRACE_S:g} s "
                "later (stuck outside Python code, e.g. in a C extension, or blocking SIGALRM), so its process "
                f"was killed; {RAISE_THE_LIMIT}")

    def traceback(self) -> str:
        if self.internal:
            return self.internal
        frames = [f for f in _fault_frames(self.faults) if not in_gradcli(f.filename)]
        if not self.faults.strip():
            return ""
        head = self.faults.strip().splitlines()[0]
        return f"{head}\nTraceback (most recent call last):\n" + "".join(traceback.format_list(frames))


_FAULT_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')


def _fault_frames(text: str) -> list:
    """faulthandler's frames (most recent first) -> traceback.FrameSummary list, outermost first, from
    the first of gradcli's own frames on (the forked process also holds the command line's frames)."""
    frames = []
    for line in text.splitlines():
        m = _FAULT_FRAME.match(line)
        if m:
            filename, lineno = m.group(1), int(m.group(2))
            frames.append(traceback.FrameSummary(filename, lineno, m.group(3),
                                                 line=linecache.getline(filename, lineno).strip()))
        elif frames and not line.strip():
            break  # the crashing thread's stack ends at the first blank line
    frames.reverse()
    first = next((i for i, f in enumerate(frames) if in_gradcli(f.filename)), 0)
    return frames[first:]


def _after_fork() -> None:
    """A framework the parent already ran leaves its thread pool to the child as a dead copy: torch's
    OpenMP pool hangs the child's first parallel operation, so the child computes on one thread."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)


def _fork_unsafe() -> bool:
    """Whether a forked copy of this process could not run the model: JAX's runtime, once this process
    has started it (imported is not enough), hangs or aborts in a fork (its threads and locks are not
    copied). Then the model process is a fresh interpreter instead."""
    if "jaxlib" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge  # where JAX keeps its started backends
    except ImportError:
        return True
    return bool(getattr(xla_bridge, "_backends", True))


def _spawn(job: Job, channel_w: int, output_w: int, faults_fd: int, parent: int) -> int:
    """worker.serve in a fresh interpreter, in a process group of its own -> its pid."""
    fds = (channel_w, output_w, faults_fd)
    for fd in fds:
        os.set_inheritable(fd, True)
    try:
        argv = [sys.executable, "-c", "import sys; from gradcli.checks.process.worker import serve_spawned; "
                "serve_spawned(sys.argv[1:])", pickle.dumps(job).hex(), *map(str, fds), str(parent)]
        return os.posix_spawn(sys.executable, argv, dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                              setpgroup=0)
    finally:
        for fd in fds:
            os.set_inheritable(fd, False)


class ModelProcess:
    """A forked model process (worker.serve) and the pipes to it."""

    def __init__(self, job: Job, on_output):
        self.job, self.on_output = job, on_output
        self.pid = self.group = None  # the group: the process group it leads (None: it could not be made one)
        self.exited = None  # its exit status once it ended (< 0: the signal that killed it)
        self.fds = []
        self.faults = None

    def start(self) -> None:
        channel_r, channel_w = os.pipe()
        output_r, output_w = os.pipe()
        self.fds = [channel_r, output_r]
        self.channel, self.output = Channel(channel_r), output_r
        self.faults = tempfile.TemporaryFile()
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()  # the child would write what is buffered a second time
            except (OSError, ValueError):
                pass
        # a stop signal between fork and the child's own handlers must not run ours in the child
        parent = os.getpid()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        # the model process's collections then leave the objects it inherits alone: no page of them is
        # copied for the collector's sake
        gc.freeze()
        try:
            if _fork_unsafe():
                pid = _spawn(self.job, channel_w, output_w, self.faults.fileno(), parent)
            else:
                with warnings.catch_warnings():
                    # Python 3.12+ warns of a fork in a process with threads; numpy's BLAS threads are
                    # forked safely (OpenBLAS re-creates them), and the model process starts no thread of ours
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
            if pid == 0:
                try:
                    os.setpgid(0, 0)
                    _after_fork()
                    os.close(channel_r)
                    os.close(output_r)
                    serve(self.job, channel_w, output_w, self.faults.fileno(), parent)
                finally:
                    os._exit(INTERNAL_FAILURE)
            self.pid = pid
            try:
                os.setpgid(pid, pid)  # also here: whichever runs first, the group exists before we kill it
            except OSError:
                pass
            try:
                # a group other than its own would be gradcli's: never to be killed
                self.group = pid if os.getpgid(pid) == pid else None
            except OSError:
                self.group = None
        finally:
            gc.unfreeze()
            os.close(channel_w)
            os.close(output_w)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def follow(self, on_message) -> Ending:
        """Read the process until it ends or must be killed."""
        sel = selectors.DefaultSelector()
        sel.register(self.channel.fd, selectors.EVENT_READ, "channel")
        sel.register(self.output, selectors.EVENT_READ, "output")
        limit = self.job.timeout + GRACE_S
        deadline = time.monotonic() + limit
        state = {"current": None, "done": False, "internal": "", "stop": False}
        nap = 0.001
        try:
            while True:
                finishing = state["done"] or self.channel.fd not in sel.get_map()
                wait = max(0.0, min(deadline - time.monotonic(), nap if finishing else 0.25))
                for key, _ in sel.select(wait):
                    data = os.read(key.fd, 1 << 16)
                    if not data:
                        sel.unregister(key.fd)
                    elif key.data == "output":
                        self._relay(data)
                    elif self._take(data, on_message, state):
                        deadline = time.monotonic() + limit
                if state["stop"]:
                    return self._kill_for("stopped", state)
                if state["done"]:  # all it had to say is said: its exit is not waited for (see close)
                    self._drain(on_message, state)
                    return Ending("done", None, None, "", state["internal"])
                if finishing:
                    nap = min(nap * 2, 0.05)
                if self._poll():
                    self._drain(on_message, state)
                    how = "done" if state["done"] else "exited"
                    return Ending(how, state["current"], self.exited, self._faults(), state["internal"])
                if time.monotonic() >= deadline:
                    return self._kill_for("timed_out", state)
        except Garbled:
            return self._kill_for("garbled", state)
        finally:
            sel.close()

    def _take(self, data: bytes, on_message, state) -> bool:
        """Messages in ``data`` -> whether any came (each one restarts the clock)."""
        messages = self.channel.feed(data)
        for message in messages:
            kind = message[0]
            if kind == "start":
                state["current"] = message[1]
            elif kind == "result":
                state["current"] = None
            elif kind == "done":
                state["done"] = True
            elif kind == "internal":
                state["internal"] = message[1]
            if on_message(message):
                state["stop"] = True
                break
        return bool(messages)

    def _drain(self, on_message, state) -> None:
        """What the ended process left in the pipes (a grandchild may hold them open: read what is there)."""
        for fd in (self.channel.fd, self.output):
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, 1 << 16)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                if fd == self.output:
                    self._relay(data)
                elif not state["stop"]:
                    self._take(data, on_message, state)

    def _relay(self, data: bytes) -> None:
        if self.on_output is not None:
            self.on_output(data)

    def _kill_for(self, how: str, state) -> Ending:
        self._kill()
        return Ending(how, state["current"], None, "", state["internal"])

    def _poll(self) -> bool:
        """Whether the process has ended. Where it can, it is left a zombie (not reaped before its group
        is killed, so that no new process can take its pid meanwhile)."""
        if self.exited is not None:
            return True
        try:
            if hasattr(os, "waitid"):
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None:
                    return False
                self.exited = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            else:  # macOS
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == 0:
                    return False
                self.exited = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # someone else reaped it: it ended, with a status no one can tell
            self.exited = _UNKNOWN
        return True

    def _kill(self) -> None:
        """SIGKILL to the process and its group (what it started), never to gradcli's own group."""
        try:
            if self.group is not None:
                os.killpg(self.group, signal.SIGKILL)
            elif self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _faults(self) -> str:
        try:
            self.faults.seek(0)
            return self.faults.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def close(self) -> int | None:
        """End the process and whatever it started (also once it is done: what it left running) -> its
        pid while it still has to be reaped (:func:`reap`; the next file need not wait for its exit)."""
        pid = self.pid
        if pid is not None:
            self._kill()
            pid = None if _reaped(pid, os.WNOHANG) else pid
        self.pid = self.group = None
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        if self.faults is not None:
            self.faults.close()
        return pid


def _reaped(pid: int, flags: int = 0) -> bool:
    try:
        return os.waitpid(pid, flags)[0] != 0
    except ChildProcessError:
        return True


def reap(pids: list, keep: int = 0) -> None:
    """Reap the killed model processes in ``pids`` that are gone, then wait for the oldest others
    (SIGKILL: at once) until at most ``keep`` are left; ``pids`` is updated in place."""
    pids[:] = [pid for pid in pids if not _reaped(pid, os.WNOHANG)]
    while len(pids) > keep:
        _reaped(pids.pop(0))
