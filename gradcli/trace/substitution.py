"""Callables swapped for traced stand-ins while a trace runs, and put back when the last trace ends.

Some calls never reach numpy's dispatch protocols with a traced argument: ``np.array([a, b])`` converts
each element in C, and scipy's python-level functions (``logsumexp``, ``norm.logpdf``) call
``np.asarray`` first. For the duration of :func:`tracing` the places they are looked up at (a module's
attribute, a class's method, a name the traced function's module bound to one of them) hold stand-ins
that send traced arguments through the routing table; everything is put back on the way out, also on an
exception, except a name something else has rebound meanwhile. Rule modules register their sites here
(:func:`add_site`) and, where sites appear only later (scipy once something imports it), a hook that
runs when a first trace starts (:func:`on_start`).
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

_LOCK = threading.RLock()
#: (owner, attribute, whether the owner's own dict held it, what it held, the stand-in)
_SITES: list = []
#: original -> its stand-in, for names the traced function's module binds to an original
_STANDINS: dict = {}
_STARTS: list = []
_DEPTH = [0]


def add_site(owner, attr: str, standin, rebind: bool = False) -> None:
    """While a trace runs, ``owner.attr`` is ``standin``; with ``rebind``, so is any name in the traced
    function's module bound to the original."""
    with _LOCK:
        own = attr in vars(owner)
        original = getattr(owner, attr)
        _SITES.append((owner, attr, own, vars(owner).get(attr), standin))
        if rebind:
            _STANDINS[original] = standin
        if _DEPTH[0]:  # added while a trace runs: in place at once
            setattr(owner, attr, standin)


def on_start(hook) -> None:
    """``hook()`` runs whenever a trace starts and none is running (it may add sites)."""
    _STARTS.append(hook)


@contextmanager
def tracing(fn):
    """The stand-ins in place while ``fn`` is traced (traces nest; the outermost puts things back)."""
    with _LOCK:
        if _DEPTH[0] == 0:
            for hook in _STARTS:
                hook()
            for owner, attr, _, _, standin in _SITES:
                setattr(owner, attr, standin)
        _DEPTH[0] += 1
    while isinstance(fn, functools.partial):
        fn = fn.func
    namespace, changed = getattr(fn, "__globals__", None), []
    try:
        if isinstance(namespace, dict):
            _rebind(namespace, changed)
        yield
    finally:
        for name, original, standin in changed:
            if namespace.get(name) is standin:
                namespace[name] = original
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                for owner, attr, own, held, standin in _SITES:
                    if vars(owner).get(attr) is not standin:
                        continue
                    if own:
                        setattr(owner, attr, held)
                    else:  # a class attribute over an inherited method (rv_continuous.logpdf)
                        delattr(owner, attr)


def active() -> bool:
    """Whether a trace is running (in any thread)."""
    return _DEPTH[0] > 0


def _rebind(namespace: dict, changed: list) -> None:
    """Point the names in ``namespace`` that hold an original at its stand-in."""
    for name, v in list(namespace.items()):
        try:
            w = _STANDINS.get(v) if callable(v) else None
        except TypeError:  # unhashable
            continue
        if w is not None and v is not w:
            namespace[name] = w
            changed.append((name, v, w))
