"""Differentiation rules for elementwise ufuncs and reductions.

Elementwise ufuncs take their partial derivatives from the primitive table (the single source of
truth): tangent = sum(partial_i * tangent_i), adjoint_i += unbroadcast(adjoint * partial_i). The few
numpy ufuncs that are not primitives of the expression language (logaddexp, square, reciprocal...)
declare their partials here in the same form. Reductions declare explicit jvp and vjp (linear maps).
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.core.primitives import PRIMITIVES, NumericOps
from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.linear import QUIET, axes_of, expand, reduction, scale, unbroadcast

_F = NumericOps(np)
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
        with np.errstate(**QUIET):  # partials at the edge of the domain: inf/nan, reported elsewhere
            ps = [self.partials[i](ans, *vals) for i in idx]
        keep = [k for k, p in enumerate(ps) if not (isinstance(p, float) and p == 0.0)]
        shapes = [np.shape(vals[i]) for i in idx]

        def jvp(ts):
            acc = None
            with np.errstate(**QUIET):
                for k in keep:
                    if ts[k] is not None:
                        c = scale(ps[k], ts[k])
                        acc = c if acc is None else acc + c
            return acc

        def vjp(g):
            out = [None] * len(idx)
            with np.errstate(**QUIET):
                for k in keep:
                    out[k] = unbroadcast(scale(ps[k], g), shapes[k])
            return out

        return record(ans, [args[i] for i in idx], jvp, vjp)


def _table(name):
    return tuple((lambda rule: lambda ans, *v: rule(_F, ans, *v))(r) for r in PRIMITIVES[name].partials)


def _one(ans, *v):
    return 1.0


_LN2 = math.log(2.0)
# ufunc -> primitive of the table whose partials it uses: the entries' ``trace_ufuncs``
TABLE_UFUNCS = {getattr(np, u): name for name, p in PRIMITIVES.items() for u in p.trace_ufuncs}
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
def _check(kwargs, allowed=()):
    bad = [k for k, v in kwargs.items() if k not in allowed and v is not np._NoValue and v is not None]
    if bad:
        raise NotTraceable(", ".join(sorted(bad)) + "=")


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
    return reduction(a, axis, kd, value, _others_product(x, axes_of(axis, x.ndim)))


def extremum_rule(func, default_axis=None):
    """max/min: the derivative goes to the extreme element; ties (a kink) share it equally."""

    def rule(a, axis=default_axis, out=None, keepdims=False, **kw):
        _check(dict(kw, out=out), ("initial",))
        x = a._value
        kd = keepdims if keepdims is not np._NoValue else False
        value = func(x, axis=axis, keepdims=kd, **kw)
        axes = axes_of(axis, x.ndim)
        mask = x == expand(value, x.shape, axes, kd)
        with np.errstate(**QUIET):
            w = mask / np.sum(mask, axis=axes, keepdims=True)
        return reduction(a, axis, kd, value, w.astype(x.dtype if x.dtype.kind in "fc" else float))

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
    return reduction(a, axis, kd, np.var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=kd), w)


def std_rule(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    axes, ddof, w = _moments(x, axis, ddof, dict(kw, out=out))
    value = np.std(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=kd)
    with np.errstate(**QUIET):  # std = 0 is a kink of sqrt: infinite weights, reported by the checks
        w = w / (2 * np.std(x, axis=axes, dtype=dtype, ddof=ddof, keepdims=True))
    return reduction(a, axis, kd, value, w)


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
