"""numpy's transcendental functions as another machine's libm or SIMD loops might round them.

libms and numpy's SIMD loops (which one runs depends on the CPU: AVX2, AVX-512, NEON) are faithful, not
correctly rounded: the same ``exp(x)`` can differ by an ulp from one machine to the next. ``one_ulp_off``
simulates such a machine in this process: every float64 (or complex128) result of the functions below is
moved one ulp up, one ulp down or kept, chosen by a hash of its bits, so that, as with a real libm, the
same argument always gives the same result. Basic arithmetic and ``sqrt`` are correctly rounded by IEEE
754 on every machine, and are left alone.

The tests use it to show that what they compare does not pin the last bits of a libm (tests/test_docs.py
runs every documented console session through it).
"""
from __future__ import annotations

import contextlib

import numpy as np

FUNCTIONS = ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sinh", "cosh",
             "tanh", "arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh", "arctanh", "cbrt", "hypot")
#: the hash multipliers of the simulated machines (any odd 64-bit number is another machine)
MACHINES = (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03)


def nudged(result, key: int):
    """``result`` with each finite, non-zero float64 element one ulp up, one ulp down or unchanged."""
    a = np.asarray(result)
    if a.dtype == np.complex128:
        out = nudged(a.real, key) + 1j * nudged(a.imag, key ^ 0x5555555555555555)
    elif a.dtype == np.float64:
        bits = np.array(a, order="C").view(np.uint64)
        way = ((bits * np.uint64(key)) >> np.uint64(61)) % np.uint64(3)  # 0 kept, 1 up, 2 down
        out = np.where(way == 1, np.nextafter(a, np.inf), np.where(way == 2, np.nextafter(a, -np.inf), a))
        out = np.where(np.isfinite(a) & (a != 0), out, a)
    else:
        return result
    return out if isinstance(result, np.ndarray) else out[()]


def _wrap(f, key):
    def off(*args, **kwargs):
        r = f(*args, **kwargs)
        out = kwargs.get("out")
        if out is None:
            return nudged(r, key)
        o = out[0] if isinstance(out, tuple) else out
        where = kwargs.get("where", True)
        with np.errstate(all="ignore"):
            np.copyto(o, nudged(o, key), where=where)
        return r
    off.__name__ = off.__qualname__ = f.__name__
    off.__doc__ = f.__doc__
    return off


@contextlib.contextmanager
def one_ulp_off(key: int = MACHINES[0]):
    """Within the block, ``numpy.sin`` and the rest of :data:`FUNCTIONS` round as another machine would."""
    saved = {name: getattr(np, name) for name in FUNCTIONS}
    try:
        for name, f in saved.items():
            setattr(np, name, _wrap(f, key))
        yield
    finally:
        for name, f in saved.items():
            setattr(np, name, f)
