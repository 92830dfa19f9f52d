"""Differentiation rules for elementwise ufuncs and reductions.

Elementwise ufuncs take their partial derivatives from the primitive table (the single source of
truth): tangent = sum(partial_i * tangent_i), adjoint_i += unbroadcast(adjoint * partial_i). The few
numpy ufuncs that are not primitives of the expression language (logaddexp, square, reciprocal...)
declare their partials here in the same form. Reductions declare explicit jvp and vjp (linear maps).
"""
from __future__ import annotations

import math

import numpy as np

from ..primitives import PRIMITIVES, NumericOps
from .array import NotTraceable, Traced, record, value_of

_F = NumericOps(np)
_QUIET = dict(divide="ignore", invalid="ignore", over="ignore", under="ignore")


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


class Elementwise:
    """A differentiable ufunc; ``partials[i](ans, *args)`` is d ans / d args[i]."""

    def __init__(self, ufunc, partials):
        self.ufunc = ufunc
        self.partials = partials

    def __call__(self, *args, **kwargs):
        if set(kwargs) - {"dtype", "casting"}:
            raise NotTraceable(", ".join(sorted(set(kwargs) - {"dtype", "casting"})) + "=")
        vals = [value_of(a) for a in args]
        ans = np.asarray(self.ufunc(*vals, **kwargs))
        idx = [i for i, a in enumerate(args) if isinstance(a, Traced)]
        with np.errstate(**_QUIET):  # partials at the edge of the domain: inf/nan, reported elsewhere
            ps = [self.partials[i](ans, *vals) for i in idx]
        keep = [k for k, p in enumerate(ps) if not (isinstance(p, float) and p == 0.0)]
        shapes = [np.shape(vals[i]) for i in idx]

        def jvp(ts):
            acc = None
            with np.errstate(**_QUIET):
                for k in keep:
                    if ts[k] is not None:
                        c = scale(ps[k], ts[k])
                        acc = c if acc is None else acc + c
            return acc

        def vjp(g):
            out = [None] * len(idx)
            with np.errstate(**_QUIET):
                for k in keep:
                    out[k] = unbroadcast(scale(ps[k], g), shapes[k])
            return out

        return record(ans, [args[i] for i in idx], jvp, vjp)


def _table(name):
    return tuple((lambda rule: lambda ans, *v: rule(_F, ans, *v))(r) for r in PRIMITIVES[name].partials)


def _one(ans, *v):
    return 1.0


_LN2 = math.log(2.0)
# ufunc -> primitive of the table whose partials it uses
TABLE_UFUNCS = {
    np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "div", np.negative: "neg",
    np.power: "pow", np.float_power: "pow", np.sin: "sin", np.cos: "cos", np.tan: "tan",
    np.arcsin: "asin", np.arccos: "acos", np.arctan: "atan", np.arctan2: "atan2", np.sinh: "sinh",
    np.cosh: "cosh", np.tanh: "tanh", np.arcsinh: "asinh", np.arccosh: "acosh", np.arctanh: "atanh",
    np.exp: "exp", np.expm1: "expm1", np.log: "log", np.log2: "log2", np.log10: "log10",
    np.log1p: "log1p", np.sqrt: "sqrt", np.cbrt: "cbrt", np.absolute: "abs", np.fabs: "abs",
    # ties x == y are kinks; the table's step(0) = 0 gives neither side a derivative there
    np.maximum: "max", np.minimum: "min", np.fmax: "max", np.fmin: "min", np.hypot: "hypot",
}
# numpy ufuncs that are not primitives of the expression language: their partials, written once here
EXTRA_PARTIALS = {
    np.positive: (_one,),
    np.square: (lambda a, x: 2 * x,),
    np.reciprocal: (lambda a, x: -(a * a),),
    np.exp2: (lambda a, x: _LN2 * a,),
    # exp(x - ans) <= 1: no overflow, unlike exp(x) / (exp(x) + exp(y))
    np.logaddexp: (lambda a, x, y: np.exp(x - a), lambda a, x, y: np.exp(y - a)),
    np.logaddexp2: (lambda a, x, y: np.exp2(x - a), lambda a, x, y: np.exp2(y - a)),
    np.deg2rad: (lambda a, x: math.pi / 180,),
    np.rad2deg: (lambda a, x: 180 / math.pi,),
    np.remainder: (_one, lambda a, x, y: -np.floor_divide(x, y)),
    np.fmod: (_one, lambda a, x, y: -np.trunc(np.true_divide(x, y))),
}


def elementwise_rules():
    rules = {u: Elementwise(u, _table(n)) for u, n in TABLE_UFUNCS.items()}
    rules.update({u: Elementwise(u, p) for u, p in EXTRA_PARTIALS.items()})
    return rules


def conjugate(x, **kwargs):
    if kwargs:
        raise NotTraceable(", ".join(kwargs) + "=")
    # not holomorphic: with the bilinear pairing its transpose is conjugation again
    return record(np.conjugate(x._value), [x], lambda ts: np.conjugate(ts[0]), lambda g: [np.conjugate(g)])


# --- reductions -------------------------------------------------------------------------------------
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


def _check(kwargs, allowed=()):
    bad = [k for k, v in kwargs.items() if k not in allowed and v is not np._NoValue and v is not None]
    if bad:
        raise NotTraceable(", ".join(sorted(bad)) + "=")


def _reduction(x, axis, keepdims, value, weights):
    """A node for a reduction whose derivative is sum(weights * t) over ``axes``."""
    shape, axes = x.shape, axes_of(axis, x.ndim)
    kd = bool(keepdims) if keepdims is not np._NoValue else False

    def jvp(ts):  # scale: a zero tangent stays zero against an infinite weight (norm or std at 0)
        with np.errstate(**_QUIET):
            return np.sum(scale(weights, ts[0]), axis=axes, keepdims=kd)

    def vjp(g):
        with np.errstate(**_QUIET):
            return [scale(weights, expand(g, shape, axes, kd))]

    return record(value, [x], jvp, vjp)


def sum_rule(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    _check(dict(kw, out=out), ("initial",))
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    value = np.sum(x, axis=axis, dtype=dtype, keepdims=kd, **kw)
    shape, axes = x.shape, axes_of(axis, x.ndim)
    return record(value, [a], lambda ts: np.sum(ts[0], axis=axes, dtype=dtype, keepdims=kd),
                  lambda g: [expand(g, shape, axes, kd)])


def mean_rule(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    _check(dict(kw, out=out))
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    value = np.mean(x, axis=axis, dtype=dtype, keepdims=kd)
    shape, axes = x.shape, axes_of(axis, x.ndim)
    n = math.prod(shape[i] for i in axes)
    return record(value, [a], lambda ts: np.mean(ts[0], axis=axes, dtype=dtype, keepdims=kd),
                  lambda g: [expand(g, shape, axes, kd) / n])


def _others_product(x, axes):
    """For every element, the product of the other elements of its reduction group, without dividing
    (x / prod is 0/0 where an element is 0): exclusive cumulative products from both ends."""
    k = len(axes)
    moved = np.moveaxis(x, axes, range(x.ndim - k, x.ndim))
    flat = moved.reshape(moved.shape[: x.ndim - k] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), x.dtype)
    left = np.concatenate([ones, np.cumprod(flat[..., :-1], axis=-1)], axis=-1)
    right = np.concatenate([np.cumprod(flat[..., :0:-1], axis=-1)[..., ::-1], ones], axis=-1)
    return np.moveaxis((left * right).reshape(moved.shape), range(x.ndim - k, x.ndim), axes)


def prod_rule(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    _check(dict(kw, out=out), ("initial",))
    x = a._value
    kd = keepdims if keepdims is not np._NoValue else False
    value = np.prod(x, axis=axis, dtype=dtype, keepdims=kd, **kw)
    return _reduction(a, axis, kd, value, _others_product(x, axes_of(axis, x.ndim)))


def extremum_rule(func, default_axis=None):
    """max/min: the derivative goes to the extreme element; ties (a kink) share it equally."""

    def rule(a, axis=default_axis, out=None, keepdims=False, **kw):
        _check(dict(kw, out=out), ("initial",))
        x = a._value
        kd = keepdims if keepdims is not np._NoValue else False
        value = func(x, axis=axis, keepdims=kd, **kw)
        axes = axes_of(axis, x.ndim)
        mask = x == expand(value, x.shape, axes, kd)
        with np.errstate(**_QUIET):
            w = mask / np.sum(mask, axis=axes, keepdims=True)
        return _reduction(a, axis, kd, value, w.astype(x.dtype if x.dtype.kind in "fc" else float))

    return rule


def _moments(x, axis, ddof, kw):
    if kw.get("correction", np._NoValue) is not np._NoValue:
        ddof = kw.pop("correction")
    _check(kw)
    axes = axes_of(axis, x.ndim)
    n = math.prod(x.shape[i] for i in axes)
    # d var = 2/(n - ddof) * sum((x - mean) * dx): the mean's own change sums to zero against x - mean
    return axes, ddof, 2 * (x - np.mean(x, axis=axes, keepdims=True)) / (n - ddof)


def var_rule(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    axes, ddof, w = _moments(x, axis, ddof, dict(kw, out=out))
    return _reduction(a, axis, kd, np.var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=kd), w)


def std_rule(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    axes, ddof, w = _moments(x, axis, ddof, dict(kw, out=out))
    value = np.std(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=kd)
    with np.errstate(**_QUIET):  # std = 0 is a kink of sqrt: infinite weights, reported by the checks
        w = w / (2 * np.std(x, axis=axes, dtype=dtype, ddof=ddof, keepdims=True))
    return _reduction(a, axis, kd, value, w)


def cumsum_rule(a, axis=None, dtype=None, out=None):
    _check({"out": out})
    x = a._value
    value = np.cumsum(x, axis=axis, dtype=dtype)

    def vjp(g):
        if axis is None:  # cumsum of the flattened array
            return [np.cumsum(g[::-1])[::-1].reshape(x.shape)]
        return [np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)]

    return record(value, [a], lambda ts: np.cumsum(ts[0], axis=axis, dtype=dtype), vjp)


def ufunc_reduce(rule):
    """ufunc.reduce defaults to axis=0, where the numpy function reduces everything."""

    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, **kw):
        kwargs = dict(axis=axis, out=out, keepdims=keepdims, **kw)
        return rule(a, dtype=dtype, **kwargs) if dtype is not None else rule(a, **kwargs)

    return reduce


def add_accumulate(a, axis=0, dtype=None, out=None):
    return cumsum_rule(a, axis=axis, dtype=dtype, out=out)
