"""Building, splitting and selecting arrays: np.array of lists, np.r_, np.c_, append, the splits,
linspace, kron, rollaxis, select, piecewise, nan_to_num; and sinc, degrees, radians.

Most are gathers (every output element a copy of an input element: ``structural.gather_rule``) or
compositions of routed numpy calls on Traced values, differentiated by the rules those calls have; a
composition holds numpy's own value (``linear.with_value``), so the traced value is the plain one. The
operations along an axis (sort, diff, gradient, cumprod, cross) are in :mod:`gradcli.trace.along_axis`.
"""
from __future__ import annotations

import collections.abc
import functools
import sys

import numpy as np

from gradcli.trace import along_axis
from gradcli.trace import substitution
from gradcli.trace.array import (NotTraceable, Traced, dispatch, find_tape, gather, record, unwrap,
                                 value_of, write_into)
from gradcli.trace.linear import unbroadcast, with_value
from gradcli.trace.rules import EXTRA_PARTIALS, Elementwise
from gradcli.trace.structural import gather_rule, transpose_rule
from gradcli.trace.tape import user_frame

# --- numpy's array constructors while a trace runs ----------------------------------------------------
# np.array([a, b]) converts each element in C (__array__, then float()): no protocol can hand a traced
# result back. While a trace runs (gradcli.trace.substitution), np.array, np.asarray and np.asanyarray,
# and the ``array`` that np.r_ and np.c_ call, are stand-ins that send a list or tuple holding traced
# values through the routing table (np.r_'s sends a traced array too); outside a trace numpy's own
# functions are in place (numba, among others, knows them by identity). np.array of a Traced from user
# code is a copy, routed too (a gather of its elements); a Traced handed to np.asarray or np.asanyarray
# is still converted, and reported as a cut; so is a list or Traced converted inside numpy or a library,
# which expects an ndarray back, and a name bound before the trace (``from numpy import array``).
CONSTRUCTORS = {"array": np.array, "asarray": np.asarray, "asanyarray": np.asanyarray}
R_ARRAY = (np.array, "r_")  # the routing key of np.r_'s and np.c_'s array
_INDEX_TRICKS = sys.modules.get(type(np.r_).__module__)


def _from_user(caller) -> bool:
    # numpy and libraries convert lists inside their own code and expect an ndarray back
    return user_frame() == (caller.f_code.co_filename, caller.f_lineno)


def _holds_traced(seq) -> bool:
    for o in seq:  # user code can hand over long plain lists: the exact types, quickly
        t = type(o)
        if t is Traced or (t is list or t is tuple) and _holds_traced(o):
            return True
    return False


def _constructor(key, original, name, lists_only, copies=False):
    """The stand-in: ``lists_only`` routes lists alone (and np.r_'s any traced argument); ``copies``
    routes a Traced from user code too (np.array's copy, as autograd traces it)."""
    @functools.wraps(original)
    def constructor(*args, **kwargs):
        if args:
            obj = args[0]
            t = type(obj)
            if ((t in (list, tuple) and _holds_traced(obj) or copies and t is Traced)
                    and _from_user(sys._getframe(1)) or not lists_only and find_tape(obj) is not None):
                return dispatch(key, original, args, kwargs, name)
        return original(*args, **kwargs)

    return constructor


for _attr, _f in CONSTRUCTORS.items():
    substitution.add_site(np, _attr, _constructor(_f, _f, f"np.{_attr}", True, copies=_attr == "array"))


def _full_standin(original):
    # np.full dispatches on like= only: a traced fill value reaches no protocol
    @functools.wraps(original)
    def full(shape, fill_value, *args, **kwargs):
        if type(fill_value) is Traced:
            return dispatch(original, original, (shape, fill_value) + args, kwargs, "np.full")
        return original(shape, fill_value, *args, **kwargs)
    return full


substitution.add_site(np, "full", _full_standin(np.full))


def _filled(value, fill_value):
    """A node holding ``value`` (numpy's result), every element a copy of the traced scalar ``fill_value``."""
    if value.dtype.kind in "biu":  # an integer array: piecewise constant in the fill value
        return value
    if np.ndim(fill_value) != 0 or value.dtype != fill_value.dtype:
        raise NotTraceable(f"a {fill_value.dtype}{list(fill_value.shape)} fill value for a {value.dtype} array")
    return gather(value, [fill_value], np.zeros(value.shape, dtype=np.int64))


def real_if_close_rule(a, tol=100):
    """np.real_if_close: the real part where numpy drops an imaginary part within tol, else a itself."""
    value = np.real_if_close(value_of(a), tol=tol)
    if np.iscomplexobj(value_of(a)) and not np.iscomplexobj(value):
        return np.real(a)
    return a


def full_rule(shape, fill_value, dtype=None, order="C", **kwargs):
    if kwargs.get("like") is not None:
        raise NotTraceable("like=")
    return _filled(np.full(shape, value_of(fill_value), dtype=dtype, order=order), fill_value)


def full_like_rule(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    value = np.full_like(value_of(a), value_of(fill_value), dtype=dtype, order=order, subok=subok, shape=shape)
    return _filled(value, fill_value) if isinstance(fill_value, Traced) else value
if getattr(_INDEX_TRICKS, "array", None) is np.array:
    substitution.add_site(_INDEX_TRICKS, "array", _constructor(R_ARRAY, np.array, "np.r_/np.c_", False))


def constructor_rule(func):
    """np.array and its kin on a list holding traced values: a gather of the elements."""
    gathered = gather_rule(func)

    def rule(obj, dtype=None, *args, like=None, **kwargs):
        if like is not None:
            raise NotTraceable("like=")
        kwargs = unwrap(kwargs)
        value = func(unwrap(obj), dtype, *args, **kwargs)  # first: numpy's own errors (ragged lists)
        if value.dtype.kind in "biu":  # integers: piecewise constant, no derivative
            return value
        if value.dtype.kind not in "fc":
            raise NotTraceable(f"dtype {value.dtype}")
        if args:  # asarray(a, dtype, order)
            kwargs = dict(kwargs, order=args[0])
        return gathered(obj, dtype=dtype, **kwargs)

    return rule


# --- splits, rearrangements, products -------------------------------------------------------------------
def pieces_rule(func):
    """split, array_split, hsplit, vsplit, dsplit, unstack: one gather per piece."""

    def rule(ary, *args, **kwargs):
        if not isinstance(ary, Traced):
            raise NotTraceable("traced non-data argument")
        args, kwargs = unwrap(args), unwrap(kwargs)
        values = func(ary._value, *args, **kwargs)
        numbers = func(np.arange(ary.size).reshape(ary.shape), *args, **kwargs)
        return type(values)(gather(v, [ary], np.asarray(i)) for v, i in zip(values, numbers))

    return rule


def rollaxis_rule(a, axis, start=0):
    # an empty array whose sizes are its axis numbers: rollaxis's own permutation, read off its shape
    perm = np.rollaxis(np.empty(tuple(range(a.ndim))), axis, start).shape
    return transpose_rule(a, perm)


def kron_rule(a, b):
    value = np.kron(value_of(a), value_of(b))
    sa, sb = np.shape(value_of(a)), np.shape(value_of(b))
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    # every pair of elements multiplied, a's axes interleaved with b's: numpy's own products
    pa = np.reshape(a, [n for s in sa for n in (s, 1)])
    pb = np.reshape(b, [n for s in sb for n in (1, s)])
    return with_value(np.reshape(np.multiply(pa, pb), value.shape), value)


def linspace_rule(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, **kwargs):
    vs, ve, num = value_of(start), value_of(stop), value_of(num)
    res = np.linspace(vs, ve, num, endpoint, retstep, dtype, axis, **kwargs)
    value, step = res if retstep else (res, None)
    if value.dtype.kind in "biu":  # integer samples: piecewise constant
        return res
    if np.iscomplexobj(value):
        raise NotTraceable("complex endpoints")
    ends = [(p, s) for p, s in ((start, -1), (stop, 1)) if isinstance(p, Traced)]
    if not ends:
        raise NotTraceable("traced non-data argument")
    bshape = np.broadcast_shapes(np.shape(vs), np.shape(ve))
    ax = axis % (len(bshape) + 1)
    w = np.linspace(0.0, 1.0, num, endpoint).reshape([num if i == ax else 1 for i in range(len(bshape) + 1)])
    weights = [1 - w if s < 0 else w for _, s in ends]  # sample k = start + (stop - start) * k / div
    shapes = [p.shape for p, _ in ends]

    def jvp(ts):
        acc = None
        for t, wk in zip(ts, weights):
            if t is not None:
                c = np.expand_dims(np.broadcast_to(t, bshape), ax) * wk
                acc = c if acc is None else acc + c
        return acc

    def vjp(g):
        return [unbroadcast(np.sum(g * wk, axis=ax), s) for wk, s in zip(weights, shapes)]

    samples = record(value, [p for p, _ in ends], jvp, vjp)
    if not retstep:
        return samples
    div = num - 1 if endpoint else num
    if div <= 0:  # numpy's step is NaN there
        return samples, step
    signs = [s / div for _, s in ends]
    steps = record(step, [p for p, _ in ends],
                   lambda ts: sum(np.broadcast_to(t, bshape) * s for t, s in zip(ts, signs) if t is not None),
                   lambda g: [unbroadcast(g * s, sh) for s, sh in zip(signs, shapes)])
    return samples, steps


# --- selections ---------------------------------------------------------------------------------------
def select_rule(condlist, choicelist, default=0):
    value = np.select(unwrap(condlist), unwrap(choicelist), unwrap(default))  # numpy's checks first
    if not any(isinstance(c, Traced) for c in list(choicelist) + [default]):
        raise NotTraceable("traced non-data argument")
    out = default
    for cond, choice in zip(reversed(unwrap(condlist)), reversed(list(choicelist))):  # the first one wins
        out = np.where(cond, choice, out)
    out = np.broadcast_to(out, value.shape) if np.shape(value_of(out)) != value.shape else out
    return with_value(out, value)


def piecewise_rule(x, condlist, funclist, *args, **kw):
    """numpy's own steps on the traced ``x``: each callable gets the traced piece ``x[cond]``."""
    if not isinstance(x, Traced):
        raise NotTraceable("traced non-data argument")
    condlist = unwrap(condlist)
    if np.isscalar(condlist) or not isinstance(condlist[0], (list, np.ndarray)) and x.ndim != 0:
        condlist = [condlist]
    condlist = np.asarray(condlist, dtype=bool)
    n, n2 = len(condlist), len(funclist)
    if n == n2 - 1:  # the "otherwise" condition
        condlist = np.concatenate([condlist, ~np.any(condlist, axis=0, keepdims=True)], axis=0)
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    zeros = np.zeros_like(x._value)
    y = Traced(zeros, x._tape.add((), None, None, zeros.shape, zeros.dtype), x._tape)  # a constant node
    for cond, func in zip(condlist, funclist):
        if not isinstance(func, collections.abc.Callable):
            y[cond] = func
        else:
            vals = x[cond]
            if vals.size > 0:
                y[cond] = func(vals, *args, **kw)
    return y


def nan_to_num_rule(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if not isinstance(x, Traced) or any(isinstance(v, Traced) for v in (nan, posinf, neginf)):
        raise NotTraceable("traced replacement value")
    v = x._value
    if np.iscomplexobj(v):
        raise NotTraceable("complex input")
    value = np.nan_to_num(v, copy=True, nan=nan, posinf=posinf, neginf=neginf)
    finite = np.isfinite(v)  # a replaced element is a constant: derivative 0 there, 1 elsewhere

    def keep(t):
        return np.where(finite, t, np.zeros((), np.asarray(t).dtype))

    res = record(value, [x], lambda ts: keep(ts[0]), lambda g: [keep(g)])
    return res if copy else write_into(x, res, in_place=True)


# --- elementwise functions outside the ufunc tables ---------------------------------------------------
def _sinc_partial(ans, x):
    """d sinc / dx = (cos(pi x) - sinc(x)) / x, by its series where that difference cancels."""
    y = np.pi * np.asarray(x, float)
    y2 = y * y
    series = np.pi * y * (-1 / 3 + y2 * (1 / 30 + y2 * (-1 / 840 + y2 * (1 / 45360 - y2 / 3991680))))
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = (np.cos(y) - ans) / x
    return np.where(np.abs(y) < 0.1, series, direct)


def routes(d) -> dict:
    """numpy (or scipy) callable -> Route, built with ``d(impl)`` (a differentiable route)."""
    table = {f: d(constructor_rule(f)) for f in CONSTRUCTORS.values()}
    table[R_ARRAY] = d(constructor_rule(np.array))
    table.update({
        np.append: d(gather_rule(np.append, data=(0, 1))),
        np.split: d(pieces_rule(np.split)), np.array_split: d(pieces_rule(np.array_split)),
        np.hsplit: d(pieces_rule(np.hsplit)), np.vsplit: d(pieces_rule(np.vsplit)),
        np.dsplit: d(pieces_rule(np.dsplit)),
        np.rollaxis: d(rollaxis_rule), np.kron: d(kron_rule), np.linspace: d(linspace_rule),
        np.select: d(select_rule), np.piecewise: d(piecewise_rule), np.nan_to_num: d(nan_to_num_rule),
        np.sinc: d(Elementwise(np.sinc, (_sinc_partial,))),
        np.degrees: d(Elementwise(np.degrees, EXTRA_PARTIALS[np.rad2deg])),
        np.radians: d(Elementwise(np.radians, EXTRA_PARTIALS[np.deg2rad])),
        np.full: d(full_rule), np.full_like: d(full_like_rule), np.real_if_close: d(real_if_close_rule),
    })
    if hasattr(np, "unstack"):  # numpy >= 2.1
        table[np.unstack] = d(pieces_rule(np.unstack))
    table.update(along_axis.routes(d))
    return table
