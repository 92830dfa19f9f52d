"""Telling the user's Ctrl-C apart from a model that raises KeyboardInterrupt or calls ``sys.exit``.

A check's code cannot end the run: SystemExit, GeneratorExit, KeyboardInterrupt or any other
BaseException raised by user code is that check's ``error`` (or, at import, that file's import error).
Only a SIGINT really delivered to the process stops the run. While :func:`watching_sigint` is active, a
handler records that the signal arrived before raising KeyboardInterrupt as Python's default does; a
KeyboardInterrupt without that record came from the user's code. Outside it (the pytest plugin,
``assert_gradients``) every KeyboardInterrupt is taken as real, as before.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class _State:
    watching = False
    received = False


_STATE = _State()


def _on_sigint(signum, frame):
    _STATE.received = True
    raise KeyboardInterrupt


@contextmanager
def watching_sigint():
    """Within this block a real SIGINT is recorded (see :func:`interrupted`); main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, _on_sigint)
    _STATE.watching, _STATE.received = True, False
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        _STATE.watching = False


def interrupted() -> bool:
    """Whether the user's Ctrl-C arrived while :func:`watching_sigint` was active."""
    return _STATE.received


def is_user_interrupt(exc: BaseException) -> bool:
    """True for the Ctrl-C of the person running gradcli, which must stop the run; False for what the
    code under test raised itself."""
    if not isinstance(exc, KeyboardInterrupt):
        return False
    return _STATE.received or not _STATE.watching


def raised_by_user_code(exc: BaseException) -> str:
    """What the code under test raised, in words: ``sys.exit(0)``, ``KeyboardInterrupt``, ``Custom('x')``."""
    if isinstance(exc, SystemExit):
        return f"SystemExit (sys.exit({exc.code!r}))"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises still has a name
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
