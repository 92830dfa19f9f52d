"""The linear maps the differentiation rules share: broadcasting and its transpose, reductions.

Every rule module (elementwise and reductions, contractions, structural operations) builds its
jvp and vjp from these, so they sit below all of them.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import record

# partials at the edge of a domain are inf or NaN on purpose: the checks report them, numpy need not
QUIET = dict(divide="ignore", invalid="ignore", over="ignore", under="ignore")


def unbroadcast(g, shape):
    """Sum ``g`` down to ``shape``: the transpose of broadcasting an array of ``shape`` to g's shape."""
    g = np.asarray(g)
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return np.broadcast_to(g, shape) if g.shape != tuple(shape) else g


def scale(p, t):
    """p * t, but a zero tangent stays zero where the partial is infinite or NaN (sqrt at 0 times 0)."""
    if isinstance(p, float):
        return t if p == 1.0 else p * t
    out = p * t
    if not np.all(np.isfinite(p)):
        out = np.where(t == 0, np.zeros((), out.dtype), out)
    return out


def axes_of(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if np.isscalar(axis) else tuple(axis)
    return tuple(sorted(a % ndim for a in axis)) if ndim else ()


def expand(g, shape, axes, keepdims):
    """Broadcast a reduced ``g`` back to the input ``shape`` (the transpose of a sum over ``axes``)."""
    g = np.asarray(g)
    if not keepdims:
        g = g.reshape([1 if i in axes else n for i, n in enumerate(shape)])
    return np.broadcast_to(g, shape)


def reduction(x, axis, keepdims, value, weights):
    """A node for a reduction whose derivative is sum(weights * t) over ``axes``."""
    shape, axes = x.shape, axes_of(axis, x.ndim)
    kd = bool(keepdims) if keepdims is not np._NoValue else False

    def jvp(ts):  # scale: a zero tangent stays zero against an infinite weight (norm or std at 0)
        with np.errstate(**QUIET):
            return np.sum(scale(weights, ts[0]), axis=axes, keepdims=kd)

    def vjp(g):
        with np.errstate(**QUIET):
            return [scale(weights, expand(g, shape, axes, kd))]

    return record(value, [x], jvp, vjp)
