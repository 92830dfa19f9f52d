"""Differentiation rules for elementwise ufuncs and reductions.

Elementwise ufuncs take their partial derivatives from the primitive table (the single source of
truth): tangent = sum(partial_i * tangent_i), adjoint_i += unbroadcast(adjoint * partial_i). The few
numpy ufuncs that are not primitives of the expression language (logaddexp, square, reciprocal...)
declare their partials here in the same form. Reductions declare explicit jvp and vjp (linear maps).
Complex operands (the convention is in :mod:`gradcli.trace.linear`) take the same partials where the
function is holomorphic, conjugated in the vjp; the other ufuncs refuse them, except abs.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.core.primitives import PRIMITIVES, NumericOps
from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.linear import axes_of, conj, expand, for_parent, QUIET, reduction, scale, unbroadcast, with_value

_F = NumericOps(np)
class Elementwise:
    """A differentiable ufunc; ``partials[i](ans, *args)`` is d ans / d args[i].

    ``complex_partials`` serve complex operands (the holomorphic derivative, or 2 d ans / d z for a
    real ``ans``); None refuses them: a ufunc that is not holomorphic has no complex derivative."""

    def __init__(self, ufunc, partials, complex_partials=None):
        self.ufunc = ufunc
        self.partials = partials
        self.complex_partials = complex_partials

    def __call__(self, *args, **kwargs):
        if set(kwargs) - {"dtype", "casting"}:
            raise NotTraceable(", ".join(sorted(set(kwargs) - {"dtype", "casting"})) + "=")
        vals = [value_of(a) for a in args]
        ans = np.asarray(self.ufunc(*vals, **kwargs))
        partials = self.partials
        if np.iscomplexobj(ans) or any(np.iscomplexobj(v) for v in vals):
            partials = self.complex_partials
            if partials is None:
                raise NotTraceable("complex input")
        idx = [i for i, a in enumerate(args) if isinstance(a, Traced)]
        with np.errstate(**QUIET):  # partials at the edge of the domain: inf/nan, reported elsewhere
            ps = [partials[i](ans, *vals) for i in idx]
        return pointwise(ans, [args[i] for i in idx], ps)


def pointwise(ans, parents, ps):
    """A node for an elementwise function with one partial per parent: d ans = sum(p * t) (its real
    part for a real ``ans`` of complex operands), and each adjoint unbroadcast(conj(p) * g)."""
    keep = [k for k, p in enumerate(ps) if not (isinstance(p, float) and p == 0.0)]
    real_out = not np.iscomplexobj(ans)

    def jvp(ts):
        acc = None
        with np.errstate(**QUIET):
            for k in keep:
                if ts[k] is not None:
                    c = scale(ps[k], ts[k])
                    acc = c if acc is None else acc + c
        return np.real(acc) if real_out and acc is not None else acc

    def vjp(g):
        out = [None] * len(parents)
        with np.errstate(**QUIET):
            for k in keep:
                out[k] = for_parent(unbroadcast(scale(conj(ps[k]), g), parents[k].shape), parents[k].dtype)
        return out

    return record(ans, parents, jvp, vjp)


def table_partials(name):
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


def _sech2(a, z):
    # sech(z)**2 = 4e/(1 + e)**2 with e = exp(-2z), taking the one of z, -z whose real part is >= 0 (the
    # function is even) so that e cannot overflow; the real rule's |x| does not hold off the real axis
    e = np.exp(-2 * np.where(z.real >= 0, z, -z))
    return 4 * e / ((1 + e) * (1 + e))


# complex partials of the holomorphic table entries whose real forms use real-only calls (abs, hypot)
COMPLEX_PARTIALS = {
    np.tanh: (_sech2,),
    np.arcsinh: (lambda a, z: 1 / np.sqrt(z * z + 1),),
    # |z| is real: d|z| = Re(conj(z) / |z| * dz); sign(0) = 0 gives the kink at 0 the real rule's value
    np.absolute: (lambda a, z: np.conjugate(np.sign(z)),),
}
_HOLOMORPHIC_EXTRA = (np.positive, np.square, np.reciprocal, np.exp2)


def elementwise_rules():
    """ufunc -> rule, and np.angle: numpy writes it in Python, but it is elementwise too."""
    rules = {}
    for u, n in TABLE_UFUNCS.items():
        real = table_partials(n)
        rules[u] = Elementwise(u, real, COMPLEX_PARTIALS.get(u, real if PRIMITIVES[n].holomorphic else None))
    for u, p in EXTRA_PARTIALS.items():
        rules[u] = Elementwise(u, p, p if u in _HOLOMORPHIC_EXTRA else None)
    rules[np.angle] = angle
    return rules


def conjugate(x, **kwargs):
    if kwargs:
        raise NotTraceable(", ".join(kwargs) + "=")
    # not holomorphic: Re<g, conj(dz)> = Re<conj(g), dz>, so its transpose is conjugation again
    return record(np.conjugate(x._value), [x], lambda ts: np.conjugate(ts[0]), lambda g: [np.conjugate(g)])


def angle(z, deg=False):
    if not isinstance(z, Traced):
        raise NotTraceable("traced deg=")
    value = np.angle(z._value, deg=deg)
    if not np.iscomplexobj(z._value):
        return value  # 0 or pi by the sign: piecewise constant
    with np.errstate(**QUIET):  # angle = Im(log z): d angle = Re(-1j / z * dz); a pole at z = 0
        w = -1j / z._value * (180 / math.pi if deg else 1.0)
    return pointwise(value, [z], [w])


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
                  lambda g: [for_parent(expand(g, shape, axes, kd), a.dtype)])


def mean_rule(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    _check(dict(kw, out=out))
    x, kd = a._value, keepdims if keepdims is not np._NoValue else False
    value = np.mean(x, axis=axis, dtype=dtype, keepdims=kd)
    shape, axes = x.shape, axes_of(axis, x.ndim)
    n = math.prod(shape[i] for i in axes)
    return record(value, [a], lambda ts: np.mean(ts[0], axis=axes, dtype=dtype, keepdims=kd),
                  lambda g: [for_parent(expand(g, shape, axes, kd) / n, a.dtype)])


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
        if np.iscomplexobj(x):  # numpy orders complex numbers by their real parts first: jumps at ties
            raise NotTraceable("complex input")
        kd = keepdims if keepdims is not np._NoValue else False
        value = func(x, axis=axis, keepdims=kd, **kw)
        axes = axes_of(axis, x.ndim)
        mask = x == expand(value, x.shape, axes, kd)
        count = np.sum(mask, axis=axes, keepdims=True)
        if "initial" in kw:  # the constant initial is one more candidate: where it wins, the slope is 0
            count = count + (np.reshape(value, count.shape) == kw["initial"])
        with np.errstate(**QUIET):
            w = mask / count
        return reduction(a, axis, kd, value, w.astype(x.dtype if x.dtype.kind in "fc" else float))

    return rule


def _moments(x, axis, ddof, kw):
    if kw.get("correction", np._NoValue) is not np._NoValue:
        ddof = kw.pop("correction")
    _check(kw)
    axes = axes_of(axis, x.ndim)
    n = math.prod(x.shape[i] for i in axes)
    if n - ddof <= 0:  # numpy divides by max(n - ddof, 0): inf or nan whatever x is, no derivative
        raise NotTraceable("ddof leaves no degrees of freedom")
    # d var = 2/(n - ddof) * sum(Re(conj(x - mean) * dx)), the mean's own change summing to zero
    return axes, ddof, 2 * conj(x - np.mean(x, axis=axes, keepdims=True)) / (n - ddof)


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
    if math.prod(x.shape[k] for k in axes) == 1:  # one element: std is identically 0 (0/0 above)
        w = np.zeros_like(w)
    return reduction(a, axis, kd, value, w)


def sign_rule(x, *args, **kwargs):
    """np.sign: piecewise constant for real input (derivative 0, the value plain); for complex input it
    is z/|z|, which is not: traced as that quotient (refused at 0, where it has no derivative)."""
    v = value_of(x)
    if not np.iscomplexobj(v):
        return np.sign(v, *args, **kwargs)
    if args or kwargs:
        raise NotTraceable("options with complex input")
    if not isinstance(x, Traced) or np.any(v == 0):
        raise NotTraceable("complex input at 0")
    return with_value(x / np.abs(x), np.sign(v))


def cumsum_rule(a, axis=None, dtype=None, out=None):
    _check({"out": out})
    x = a._value
    value = np.cumsum(x, axis=axis, dtype=dtype)

    def vjp(g):
        if axis is None:  # cumsum of the flattened array
            return [for_parent(np.cumsum(g[::-1])[::-1].reshape(x.shape), x.dtype)]
        return [for_parent(np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis), x.dtype)]

    return record(value, [a], lambda ts: np.cumsum(ts[0], axis=axis, dtype=dtype), vjp)


def ufunc_reduce(rule):
    """ufunc.reduce defaults to axis=0, where the numpy function reduces everything."""

    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, **kw):
        kwargs = dict(axis=axis, out=out, keepdims=keepdims, **kw)
        return rule(a, dtype=dtype, **kwargs) if dtype is not None else rule(a, **kwargs)

    return reduce


def add_accumulate(a, axis=0, dtype=None, out=None):
    return cumsum_rule(a, axis=axis, dtype=dtype, out=out)
