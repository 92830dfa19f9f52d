"""Independent references for the tracing tests: derivatives by central differences in mpmath at 80
digits (a step of 1e-25 leaves a truncation error near 1e-50 and a rounding error near 1e-55, so that
even a function that cancels 20 digits inside, Box-Cox's (x^l - 1) / l at l = 1e-25, keeps 30 of them),
of functions written in mpmath on object arrays, never through the rule under test."""
from __future__ import annotations

import mpmath
import numpy as np

DPS = 80
STEP = mpmath.mpf("1e-25")


def to_mp(x) -> np.ndarray:
    """A float (or complex) array as an object array of exact mpmath numbers."""
    x = np.asarray(x)
    conv = mpmath.mpc if np.iscomplexobj(x) else mpmath.mpf
    return np.array([conv(v) for v in x.ravel().tolist()] or [], dtype=object).reshape(x.shape)


def mp_jacobian(f, x) -> np.ndarray:
    """(output size, input size) real Jacobian of ``f`` (object array -> object array) at the float array
    ``x``, by central differences in mpmath."""
    x = np.asarray(x, float)
    cols = []
    with mpmath.workdps(DPS):
        base = to_mp(x)
        for k in range(x.size):
            up, down = base.copy(), base.copy()
            up.flat[k] += STEP
            down.flat[k] -= STEP
            d = (np.asarray(f(up), dtype=object) - np.asarray(f(down), dtype=object)) / (2 * STEP)
            cols.append([float(v) for v in np.ravel(d)])
    return np.array(cols, dtype=float).T.reshape(-1, x.size)


def mp_derivative(f, x, **kwargs) -> np.ndarray:
    """d f(x) / dx elementwise for a scalar mpmath function ``f(v, **kwargs)``, at each float of ``x``."""
    out = []
    with mpmath.workdps(DPS):
        for v in np.ravel(np.asarray(x, float)).tolist():
            v = mpmath.mpf(v)
            out.append(float((f(v + STEP, **kwargs) - f(v - STEP, **kwargs)) / (2 * STEP)))
    return np.array(out).reshape(np.shape(x))


def mp_apply(f, x) -> np.ndarray:
    return np.vectorize(f, otypes=[object])(x)
