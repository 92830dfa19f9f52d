"""Operations along an axis: sort, partition, diff, gradient, cumprod, cross, convolve, nansum, nanmean.

* sort and partition move elements: gathers by the permutation numpy's argsort (stable) and
  argpartition give. Where sorted elements tie, sort has no derivative (a small change reorders them):
  the tied outputs share the tangents of the tied inputs equally, as np.max's ties do, which is the
  mean of the one-sided derivatives over every order of the tie and makes np.sort(x)[-1] agree with
  np.max(x). Partition refuses ties: which element lands where in its unordered halves can jump.
* diff and cross are compositions of routed numpy calls; np.gradient is linear in ``f``: the tangent
  goes through np.gradient itself, the adjoint through the transpose of its stencil, read from numpy.
* cumprod keeps the derivative exact where the input holds zeros (no division by them).
* convolve is bilinear: the tangent convolves each tangent with the other factor; each adjoint correlates
  the output's cotangent, placed in the full convolution, with the other factor (:func:`convolution`,
  shared with scipy.signal.convolve).
* nansum and nanmean are sum and mean over the non-NaN entries: a NaN entry gets no derivative.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, unwrap, value_of
from gradcli.trace.linear import axes_of, for_parent, with_value


def _real(a):
    if not isinstance(a, Traced):
        raise NotTraceable("traced non-data argument")
    if np.iscomplexobj(a._value):
        raise NotTraceable("complex input")
    return a._value


def _permuted(a, value, perm, axis):
    """A node of ``value`` = a's elements taken along ``axis`` (None: flattened) by ``perm``."""
    numbers = np.arange(a.size).reshape(a.shape)
    idx = perm if axis is None else np.take_along_axis(numbers, perm, axis)
    flat, shape = idx.ravel(), a.shape

    def vjp(g):
        out = np.zeros(a.size, np.asarray(g).dtype)
        out[flat] = np.ravel(g)  # a permutation: no index repeats
        return [out.reshape(shape)]

    return record(value, [a], lambda ts: np.ravel(ts[0])[flat].reshape(idx.shape), vjp)


def _tie_groups(value, axis):
    """Labels of runs of equal sorted values along ``axis`` (moved last, flattened), or None: no ties."""
    s = np.moveaxis(value, axis, -1)
    if s.shape[-1] < 2 or not np.any(s[..., 1:] == s[..., :-1]):
        return None
    new = np.ones(s.shape, bool)
    new[..., 1:] = s[..., 1:] != s[..., :-1]
    labels = np.cumsum(new.ravel()) - 1
    return labels, np.bincount(labels)


def _shared(t, groups, axis):
    labels, counts = groups
    tm = np.moveaxis(np.asarray(t), axis, -1)
    mean = np.bincount(labels, tm.ravel(), len(counts)) / counts
    return np.moveaxis(mean[labels].reshape(tm.shape).astype(tm.dtype, copy=False), -1, axis)


def sort_rule(a, axis=-1, kind=None, order=None, **kwargs):
    v = _real(a)
    if order is not None:
        raise NotTraceable("order=")
    value = np.sort(v, axis=axis, kind=kind, **kwargs)
    perm = np.argsort(v, axis=axis, kind="stable")
    node = _permuted(a, value, perm, axis)
    ax = -1 if axis is None else axis
    groups = _tie_groups(value, ax)
    if groups is None:
        return node
    # averaging over each tie is its own transpose: the same map both ways
    return record(value, [node], lambda ts: _shared(ts[0], groups, ax), lambda g: [_shared(g, groups, ax)])


def partition_rule(a, kth, axis=-1, kind="introselect", order=None):
    v = _real(a)
    if order is not None:
        raise NotTraceable("order=")
    value = np.partition(v, kth, axis=axis, kind=kind)
    if _tie_groups(np.sort(v, axis=axis), -1 if axis is None else axis) is not None:
        raise NotTraceable("tied elements")
    perm = np.argpartition(v, kth, axis=axis, kind=kind)
    taken = v.ravel()[perm] if axis is None else np.take_along_axis(v, perm, axis)
    if not np.array_equal(taken, value, equal_nan=True):  # argpartition arranged them otherwise
        raise NotTraceable("arrangement")
    return _permuted(a, value, perm, axis)


def diff_rule(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    value = np.diff(*unwrap((a, n, axis, prepend, append)))  # numpy's own checks first
    if n == 0 or value.dtype.kind == "b":  # a itself; booleans differ by not_equal
        return a if n == 0 else value
    ax = axis % np.ndim(value_of(a))
    parts = []
    for edge in (prepend, a, append):
        if edge is np._NoValue:
            continue
        if np.ndim(value_of(edge)) == 0:  # a scalar stands for a slice of the edge's size 1 along axis
            shape = list(np.shape(value_of(a)))
            shape[ax] = 1
            edge = np.broadcast_to(edge, shape)
        parts.append(edge)
    x = np.concatenate(parts, axis=ax) if len(parts) > 1 else a
    hi = (slice(None),) * ax + (slice(1, None),)
    lo = (slice(None),) * ax + (slice(None, -1),)
    for _ in range(n):
        x = x[hi] - x[lo]
    return with_value(x, value)


def _stencil_transpose(n, spacing, edge_order):
    """g -> D^T g along axis 0, where np.gradient(f) = D f along that axis.

    D has at most five entries per row (i-2..i+2: the edges reach two away), so np.gradient of the
    five combs 1[j = r mod 5] gives each entry alone: bands[k + 2][i] = D[i, i + k] (0 outside)."""
    i = np.arange(n)
    bands = np.zeros((5, n))
    for r in range(5):
        col = np.gradient((i % 5 == r).astype(float), *spacing, edge_order=edge_order)
        bands[(r - i + 2) % 5, i] = col  # row i meets the comb r in the one column i + k = r mod 5

    def transpose(g):
        # (D^T g)[j] = sum_k D[j - k, j] g[j - k]; a band is 0 where i + k leaves 0..n-1, so rolling is exact
        shape = (n,) + (1,) * (g.ndim - 1)
        return sum(np.roll(bands[k + 2].reshape(shape) * g, k, axis=0) for k in range(-2, 3))

    return transpose


def gradient_rule(f, *varargs, axis=None, edge_order=1):
    v = _real(f)
    if any(isinstance(s, Traced) for s in varargs):
        raise NotTraceable("traced spacing")
    res = np.gradient(v, *varargs, axis=axis, edge_order=edge_order)  # numpy's own checks first
    axes = axes_of(axis, v.ndim) if axis is None or np.isscalar(axis) else tuple(ax % v.ndim for ax in axis)
    values = [res] if len(axes) == 1 else list(res)
    spacings = [()] * len(axes) if not varargs else [varargs] * len(axes) if len(varargs) == 1 else \
        [(s,) for s in varargs]
    outs = []
    for ax, value, spacing in zip(axes, values, spacings):
        transpose = _stencil_transpose(v.shape[ax], spacing, edge_order)
        outs.append(record(value, [f],
                           lambda ts, ax=ax, sp=spacing: np.gradient(ts[0], *sp, axis=ax, edge_order=edge_order),
                           lambda g, ax=ax, tr=transpose: [np.moveaxis(tr(np.moveaxis(g, ax, 0)), 0, ax)]))
    return outs[0] if len(axes) == 1 else tuple(outs)


def cumprod_rule(a, axis=None, dtype=None, out=None):
    v = _real(a)
    if out is not None:
        raise NotTraceable("out=")
    value = np.cumprod(v, axis=axis, dtype=dtype)
    if value.dtype.kind in "biu" and v.dtype.kind not in "biu":  # cast to integers first: a constant
        return value
    x = v.ravel() if axis is None else v
    ax = -1 if axis is None else axis % v.ndim
    if x.size == 0:
        return record(value, [a], lambda ts: None, lambda g: [None])
    ft = value.dtype if value.dtype.kind == "f" else np.dtype(float)
    xm = np.moveaxis(x, ax, -1).astype(ft)
    cm = np.moveaxis(value.reshape(x.shape), ax, -1).astype(ft)
    n = xm.shape[-1]
    # z: the first zero of each row. Before it, d c_k = c_k * sum_{j<=k} t_j / x_j; from it on, only the
    # zero's own tangent survives: d c_k = t_z * c_{z-1} * prod_{z<i<=k} x_i
    zero = xm == 0
    z = np.where(zero.any(-1), zero.argmax(-1), n)[..., None]
    k = np.arange(n)
    before, at = k < z, k == z
    safe = np.where(before, xm, 1)
    lead = np.take_along_axis(np.concatenate([np.ones(cm.shape[:-1] + (1,), ft), cm], -1), z, -1)
    tail = np.cumprod(np.where(k > z, xm, 1), -1)  # prod_{z<i<=k} x_i
    zi = np.minimum(z, n - 1)

    def moved(t):
        return np.moveaxis(np.reshape(t, x.shape), ax, -1)

    def back(t, shape):
        return np.moveaxis(t, -1, ax).reshape(shape)

    def jvp(ts):
        t = moved(ts[0])
        d = np.where(before, cm * np.cumsum(t / safe, -1), lead * np.take_along_axis(t, zi, -1) * tail)
        return back(d, value.shape)

    def vjp(g):
        g = moved(g)
        first = np.cumsum((g * cm * before)[..., ::-1], -1)[..., ::-1] / safe
        at_zero = lead * np.sum(g * tail * ~before, -1, keepdims=True)
        return [back(np.where(before, first, np.where(at, at_zero, 0)), v.shape)]

    return record(value, [a], jvp, vjp)


def multiply_accumulate(a, axis=0, dtype=None, out=None):
    return cumprod_rule(a, axis=axis, dtype=dtype, out=out)


def cross_rule(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    value = np.cross(value_of(a), value_of(b), axisa, axisb, axisc, axis)  # numpy's checks (and warning)
    if axis is not None:
        axisa = axisb = axisc = axis
    ca = list(np.moveaxis(a, axisa, -1)[..., i] for i in range(np.shape(value_of(a))[axisa]))
    cb = list(np.moveaxis(b, axisb, -1)[..., i] for i in range(np.shape(value_of(b))[axisb]))
    if len(ca) == len(cb) == 2:  # the z component alone
        return with_value(ca[0] * cb[1] - ca[1] * cb[0], value)
    a0, a1, a2 = ca + [None] * (3 - len(ca))
    b0, b1, b2 = cb + [None] * (3 - len(cb))

    def term(p, q, r, s):  # p * q - r * s, where a missing third component is 0 (a 2-vector)
        left = None if p is None or q is None else p * q
        right = None if r is None or s is None else r * s
        return left - right if left is not None and right is not None else -right if left is None else left

    # every component is a product of one of a's and one of b's: all have the broadcast shape
    c = np.stack([term(a1, b2, a2, b1), term(a2, b0, a0, b2), term(a0, b1, a1, b0)], -1)
    return with_value(np.moveaxis(c, -1, axisc), value)


def convolution(value, a, v, full, correlate):
    """A node for ``value``, the centred window of the full convolution ``full(a, v)`` that numpy's and
    scipy's modes take; ``correlate(g, w)`` is the 'valid' correlation of g with conj(w), the adjoint of
    convolving with ``w``."""
    av, vv = value_of(a), value_of(v)
    shape = tuple(n + m - 1 for n, m in zip(np.shape(av), np.shape(vv)))
    window = tuple(slice((n - k) // 2, (n - k) // 2 + k) for n, k in zip(shape, np.shape(value)))
    parents = [p for p in (a, v) if isinstance(p, Traced)]
    others = [vv if p is a else av for p in parents]

    def jvp(ts):
        acc = None
        for t, w in zip(ts, others):
            if t is not None:
                c = full(t, w)[window]
                acc = c if acc is None else acc + c
        return acc

    def vjp(g):
        placed = np.zeros(shape, np.result_type(g, av, vv))
        placed[window] = g
        return [for_parent(correlate(placed, w), p.dtype) for p, w in zip(parents, others)]

    return record(value, parents, jvp, vjp)


def convolve_rule(a, v, mode="full"):
    value = np.convolve(value_of(a), value_of(v), mode)  # numpy's checks: 1-d, non-empty, the mode
    return convolution(value, a, v, lambda x, y: np.convolve(x, y, "full"),
                       lambda g, w: np.correlate(g, w, "valid"))


def _nan_kept(a, where):
    if where is not True:
        raise NotTraceable("where=")
    keep = ~np.isnan(value_of(a))
    return np.where(keep, a, np.zeros((), value_of(a).dtype)), keep


def nansum_rule(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, initial=np._NoValue, where=True):
    if out is not None or initial is not np._NoValue:
        raise NotTraceable("out=" if out is not None else "initial=")
    value = np.nansum(value_of(a), axis=axis, dtype=dtype, keepdims=keepdims)
    kept, _ = _nan_kept(a, where)
    kd = {} if keepdims is np._NoValue else {"keepdims": keepdims}
    return with_value(np.sum(kept, axis=axis, dtype=dtype, **kd), value)


def nanmean_rule(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, *, where=True):
    if out is not None:
        raise NotTraceable("out=")
    value = np.nanmean(value_of(a), axis=axis, dtype=dtype, keepdims=keepdims)  # its all-NaN warning
    kept, keep = _nan_kept(a, where)
    kd = bool(keepdims) if keepdims is not np._NoValue else False
    count = np.sum(keep, axis=axis, keepdims=kd)
    if np.any(count == 0):
        raise NotTraceable("an all-NaN slice: the mean is NaN")
    return with_value(np.sum(kept, axis=axis, dtype=dtype, keepdims=kd) / count, value)


def routes(d) -> dict:
    return {np.sort: d(sort_rule), np.partition: d(partition_rule), np.diff: d(diff_rule),
            np.gradient: d(gradient_rule), np.cumprod: d(cumprod_rule),
            (np.multiply, "accumulate"): d(multiply_accumulate), np.cross: d(cross_rule),
            np.convolve: d(convolve_rule), np.nansum: d(nansum_rule), np.nanmean: d(nanmean_rule)}
