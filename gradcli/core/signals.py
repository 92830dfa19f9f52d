"""The signals that stop a run as Ctrl-C does (SIGINT, SIGTERM, SIGHUP), for every command alike.

While :func:`watching_signals` is active, the first such signal is recorded and raises
KeyboardInterrupt (as Python's own SIGINT handler does), so every ``finally`` on the way out runs:
that is where temporary files are removed and what ran is reported. Later signals are recorded
and raise nothing, so that the winding down the first one started is not cut short. Within
:func:`stops_deferred` the first signal is recorded too and raises nothing; :func:`stops_resumed`
raises it once the code that must report it (a command with its options read) has taken over. The exit
status is 128 + the signal (130, 143, 129), as a shell reports a process the signal ended. A signal
the caller ignores (``nohup``'s SIGHUP, a background job's SIGINT) stays ignored.
"""
from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

#: the one line that says why a run ended
_MESSAGES = {"SIGINT": "interrupted: Ctrl-C (SIGINT)", "SIGTERM": "terminated: SIGTERM", "SIGHUP": "hung up: SIGHUP"}


class _State:
    watching = False
    deferred = False  # within stops_deferred(): recorded, not raised
    received = 0  # the first stop signal that arrived while watching (0: none)
    raised = False  # whether ``received`` has raised its KeyboardInterrupt (False: deferred, still due)


_STATE = _State()


def _on_stop_signal(signum, frame):
    if _STATE.received or _STATE.deferred:
        _STATE.received = _STATE.received or signum
        return
    _STATE.received, _STATE.raised = signum, True
    raise KeyboardInterrupt


def _lost_interrupt(unraisable, chain):
    # The stop signal landed inside a callback whose exceptions Python ignores (a weakref callback of
    # importlib's module locks, a finaliser): the KeyboardInterrupt would be printed as "Exception
    # ignored" and lost, and with it every later signal (the first is recorded). Deliver it again
    # from another thread, once this hook and the callback have returned, to be raised where it
    # stops the run (a signal sent from here would be handled, and lost, inside the hook).
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _STATE.received and not _STATE.deferred:
        import threading

        signum, _STATE.received, _STATE.raised = _STATE.received, 0, False
        timer = threading.Timer(0.01, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        return
    chain(unraisable)


@contextmanager
def watching_signals():
    """Stop signals recorded and raised as KeyboardInterrupt within this block (main thread only; a
    nested block shares the outer one's record)."""
    try:
        old = {s: signal.signal(s, _on_stop_signal) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    outer = _STATE.watching, _STATE.deferred
    if not _STATE.watching:
        _STATE.received, _STATE.raised = 0, False
    _STATE.watching, _STATE.deferred = True, False
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: _lost_interrupt(unraisable, hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for s, handler in old.items():
            signal.signal(s, handler)
        _STATE.watching, _STATE.deferred = outer


@contextmanager
def stops_deferred():
    """Within :func:`watching_signals`: a stop signal is recorded but raises nothing, so that what is
    being written (the report) is written whole."""
    outer, _STATE.deferred = _STATE.deferred, True
    try:
        yield
    finally:
        _STATE.deferred = outer


@contextmanager
def stops_resumed():
    """Within :func:`stops_deferred`: stop signals raise again, and the first one, if it came while they
    were deferred, raises KeyboardInterrupt at once (on entering the block)."""
    outer, _STATE.deferred = _STATE.deferred, False
    try:
        if stop_pending():
            _STATE.raised = True
            raise KeyboardInterrupt
        yield
    finally:
        _STATE.deferred = outer


def stop_pending() -> bool:
    """Whether a stop signal came while stops were deferred and has raised nothing yet."""
    return bool(_STATE.received) and not _STATE.raised


def watching() -> bool:
    """Whether :func:`watching_signals` is active (a KeyboardInterrupt without a record then came from
    the code being run, not from a signal)."""
    return _STATE.watching


def interrupted() -> bool:
    """Whether a stop signal arrived while :func:`watching_signals` was active."""
    return bool(_STATE.received)


def stop_exit_status() -> int | None:
    """128 + the stop signal that arrived (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), or None."""
    return 128 + int(_STATE.received) if _STATE.received else None


def stop_message() -> str:
    """The line that says which signal stopped the run (Ctrl-C when none was recorded: Python's own
    KeyboardInterrupt)."""
    signum = _STATE.received or signal.SIGINT
    return _MESSAGES.get(signal.Signals(signum).name, "stopped")


def as_model_process() -> None:
    """A model process (gradcli.checks.process.worker) answers no stop signal itself: the parent ends it. So
    SIGINT is ignored there, SIGTERM and SIGHUP end it at once, and a KeyboardInterrupt raised there
    always comes from the model's code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in STOP_SIGNALS:
        if s != signal.SIGINT:
            signal.signal(s, signal.SIG_DFL)
    _STATE.watching, _STATE.deferred, _STATE.received, _STATE.raised = True, False, 0, False
