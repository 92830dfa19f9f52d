"""Telling what stops a run (the user's Ctrl-C, a SIGTERM or SIGHUP, a check's time limit) apart from a
model that raises KeyboardInterrupt or calls ``sys.exit``.

A check's code cannot end the run: SystemExit, GeneratorExit, KeyboardInterrupt or any other
BaseException raised by user code is that check's ``error`` (or, at import, that file's import error).
Only a stop signal really delivered to the process stops the run. While :func:`watching_signals` is
active, a handler records which signal arrived before raising KeyboardInterrupt as Python's default
does for SIGINT; a KeyboardInterrupt without that record came from the user's code. Outside it (the
pytest plugin, ``assert_gradients``) every KeyboardInterrupt is taken as real, as before.

:class:`TimedOut` is raised inside a check's code by the worker's alarm (gradcli.checks.worker); like
the user's Ctrl-C it comes from outside the check, so it passes through the runner instead of becoming
"the code under test raised".
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

#: The signals that stop a run the way Ctrl-C does: what ran is reported and the exit status is 128 + n,
#: as a shell reports a process the signal ended (130, 143, 129).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class TimedOut(BaseException):
    """A check (or a model file's import) outlived its time limit. A BaseException, so that neither
    gradcli's own ``except Exception`` nor the model's swallows it."""


class _State:
    watching = False
    deferred = False  # within stops_deferred(): recorded, not raised
    received = 0  # the first stop signal that arrived while watching (0: none)


_STATE = _State()


def _on_stop_signal(signum, frame):
    if _STATE.received or _STATE.deferred:
        # a second Ctrl-C must not cut short the winding down that the first one started (ending the
        # model processes, writing the report and the JUnit file)
        _STATE.received = _STATE.received or signum
        return
    _STATE.received = signum
    raise KeyboardInterrupt


@contextmanager
def watching_signals():
    """Within this block SIGINT, SIGTERM and SIGHUP are recorded (see :func:`interrupted`) and raise
    KeyboardInterrupt; main thread only. A signal the caller ignores (``nohup``'s SIGHUP, a background
    job's SIGINT) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _on_stop_signal) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _STATE.watching, _STATE.deferred, _STATE.received = True, False, 0
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _STATE.watching = False


@contextmanager
def stops_deferred():
    """Within :func:`watching_signals`: a stop signal is recorded but raises nothing, so that what is
    being written (the report) is written whole."""
    _STATE.deferred = True
    try:
        yield
    finally:
        _STATE.deferred = False


def in_model_process() -> None:
    """Set up a model process (gradcli.checks.worker): the parent alone answers stop signals (it ends
    this process), so SIGINT is ignored here and SIGTERM and SIGHUP end it at once; a KeyboardInterrupt
    raised here always comes from the model's code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in STOP_SIGNALS:
        if s != signal.SIGINT:
            signal.signal(s, signal.SIG_DFL)
    _STATE.watching, _STATE.received = True, 0


def interrupted() -> bool:
    """Whether a stop signal arrived while :func:`watching_signals` was active."""
    return bool(_STATE.received)


def stop_exit_status() -> int | None:
    """128 + the stop signal that arrived (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), or None."""
    return 128 + int(_STATE.received) if _STATE.received else None


def is_user_interrupt(exc: BaseException) -> bool:
    """True for what stops a check from outside it and must propagate: the Ctrl-C (or SIGTERM, SIGHUP)
    of the person running gradcli, or the check's time limit; False for what the code under test raised
    itself."""
    if isinstance(exc, TimedOut):
        return True
    if not isinstance(exc, KeyboardInterrupt):
        return False
    return bool(_STATE.received) or not _STATE.watching


def raised_by_user_code(exc: BaseException) -> str:
    """What the code under test raised, in words: ``sys.exit(0)``, ``KeyboardInterrupt``, ``Custom('x')``."""
    if isinstance(exc, SystemExit):
        return f"SystemExit (sys.exit({exc.code!r}))"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises still has a name
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
