"""The linear maps the differentiation rules share: broadcasting and its transpose, reductions.

Every rule module (elementwise and reductions, contractions, structural operations) builds its
jvp and vjp from these, so they sit below all of them.

Complex values follow PyTorch's convention. A tangent is the differential itself (dz = dx + i dy); the
cotangent of a complex node is the gradient of the real loss, dL/dRe(z) + i dL/dIm(z) (twice the
conjugate Wirtinger derivative), so that dL = Re(sum(conj(g) * dz)) and every vjp is the adjoint of
its jvp under the real inner product Re<a, b> = Re(sum(conj(a) * b)). A holomorphic rule with
derivative f'(z) thus transposes to vjp(g) = conj(f'(z)) * g; a real-valued one (abs, angle, var) is
written as d f = Re(w * dz), with w = 2 df/dz, and transposes to conj(w) * g; real, imag and conj
transpose to g, 1j * g and conj(g). A real node's cotangent is the real part of what reaches it.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record

# partials at the edge of a domain are inf or NaN on purpose: the checks report them, numpy need not
QUIET = dict(divide="ignore", invalid="ignore", over="ignore", under="ignore")


def for_parent(c, dtype):
    """The cotangent ``c`` as a parent of ``dtype`` receives it: its real part when the parent is real."""
    return np.real(c) if c is not None and np.iscomplexobj(c) and np.dtype(dtype).kind != "c" else c


def conj(a):
    """conj(a), without a copy for real ``a``."""
    return np.conjugate(a) if np.iscomplexobj(a) else a


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
    """A node for a reduction whose derivative is sum(weights * t) over ``axes``: its real part for a
    real value of a complex ``x`` (var, norm: ``weights`` is then 2 d value / dx, see the convention)."""
    shape, axes = x.shape, axes_of(axis, x.ndim)
    kd = bool(keepdims) if keepdims is not np._NoValue else False
    real_out = not np.iscomplexobj(value)

    def jvp(ts):  # scale: a zero tangent stays zero against an infinite weight (norm or std at 0)
        with np.errstate(**QUIET):
            t = np.sum(scale(weights, ts[0]), axis=axes, keepdims=kd)
        return np.real(t) if real_out else t

    def vjp(g):
        with np.errstate(**QUIET):
            return [for_parent(scale(conj(weights), expand(g, shape, axes, kd)), x.dtype)]

    return record(value, [x], jvp, vjp)


def with_value(node, value):
    """``node``, a composition of numpy's own steps on traced values (a dot as a tensordot), holding the
    value of numpy's own call (its summation order: the same derivative, and the plain value exactly);
    refused where the two do not describe the same array."""
    value = np.asarray(value)
    if not isinstance(node, Traced):
        raise NotTraceable("traced non-data argument")
    if node.shape != value.shape or node.dtype != value.dtype:
        raise NotTraceable(f"{node.dtype}{list(node.shape)} where numpy gives {value.dtype}{list(value.shape)}")
    node._value = value
    return node
