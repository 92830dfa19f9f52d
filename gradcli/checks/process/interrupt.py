"""Telling what stops a run (the user's Ctrl-C, a SIGTERM or SIGHUP, a check's time limit) apart from a
model that raises KeyboardInterrupt or calls ``sys.exit``.

A check's code cannot end the run: SystemExit, GeneratorExit, KeyboardInterrupt or any other BaseException
raised by user code is that check's ``error`` (or, at import, that file's import error). Only a stop signal
really delivered to the process stops the run. While :func:`gradcli.core.signals.watching_signals` is active,
a handler records which signal arrived before raising KeyboardInterrupt as Python's default does for SIGINT; a
KeyboardInterrupt without that record came from the user's code. Outside it (the pytest plugin,
``assert_gradients``) every KeyboardInterrupt is taken as real, as before.

:class:`TimedOut` is raised inside a check's code by the worker's alarm (gradcli.checks.process.worker); like
the user's Ctrl-C it comes from outside the check, so it passes through the runner instead of becoming
"the code under test raised".
"""
from __future__ import annotations

from gradcli.core.signals import interrupted, watching


class TimedOut(BaseException):
    """A check (or a model file's import) outlived its time limit. A BaseException, so that neither
    gradcli's own ``except Exception`` nor the model's swallows it."""


def is_user_interrupt(exc: BaseException) -> bool:
    """True for what stops a check from outside it and must propagate: the Ctrl-C (or SIGTERM, SIGHUP)
    of the person running gradcli, or the check's time limit; False for what the code under test raised
    itself."""
    if isinstance(exc, TimedOut):
        return True
    if not isinstance(exc, KeyboardInterrupt):
        return False
    return interrupted() or not watching()


def raised_by_user_code(exc: BaseException) -> str:
    """What the code under test raised, in words: ``sys.exit(0)``, ``KeyboardInterrupt``, ``Custom('x')``."""
    if isinstance(exc, SystemExit):
        return f"SystemExit (sys.exit({exc.code!r}))"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises still has a name
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
