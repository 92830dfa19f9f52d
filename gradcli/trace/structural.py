"""Structural operations: explicit jvp and vjp (linear maps) for shapes, indexing and selections.

Two families cover most of numpy (contractions and norms are in :mod:`gradcli.trace.contract`):

* reshape-like and axis permutations: the tangent goes through the same call, the adjoint through
  the inverse one (reshape back, inverse permutation);
* gathers (indexing, repeat, tile, concatenate, stack, pad, flip...): the call is applied once more to
  arrays of flat *element numbers* of its operands, which says where every output element comes from;
  the jvp reads tangents at those numbers and the vjp sums adjoints into them (``np.bincount``), so
  repeated indices accumulate exactly as they should. Number -1 marks an element that comes from a
  constant (a plain operand, padding, the zeros of ``np.diag``): derivative zero.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import (NotTraceable, Traced, gather, plain_key, rebuild, record, unwrap, value_of,
                                 write_into)
from gradcli.trace.linear import for_parent, unbroadcast


def _traced_leaves(obj, out):
    if isinstance(obj, Traced):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _traced_leaves(o, out)
    return out


# --- reshape-like and permutations ------------------------------------------------------------------
# where reshape and ravel take ``order`` positionally, after the array
_ORDER_AT = {np.reshape: 1, np.ravel: 0}


def _read_order(order, v):
    """The index order, "C" or "F", in which ``order`` reads the array ``v``; None: a strided "K"."""
    order = "C" if order is None else order.upper() if isinstance(order, str) else order  # as numpy reads it
    if order not in ("C", "F", "A", "K"):
        raise NotTraceable(f"order={order!r}")
    if order in ("A", "K"):  # "A": Fortran order for a Fortran-contiguous array; "K": memory order
        if v.flags.c_contiguous:
            return "C"
        return "F" if v.flags.f_contiguous else (None if order == "K" else "C")
    return order


def reshape_like(func):
    """Calls that only change the shape (reshape, ravel, squeeze, expand_dims, atleast_*); a Fortran
    order reads the elements in another sequence, so it is a gather of their element numbers."""
    at = _ORDER_AT.get(func)

    def rule(a, *args, **kwargs):
        value = func(a._value, *args, **kwargs)  # first: numpy's own errors (order="K" for reshape)
        positional = at is not None and len(args) > at
        order = _read_order(args[at] if positional else kwargs.get("order", "C"), a._value)
        if order is None:
            raise NotTraceable("order='K' of a non-contiguous array")
        if order != "C":
            if positional:
                args = args[:at] + ("F",) + args[at + 1:]
            else:
                kwargs = dict(kwargs, order="F")
            numbers = np.arange(a.size).reshape(a.shape)  # C-contiguous: "F" is read as asked
            return gather(value, [a], np.asarray(func(numbers, *args, **kwargs)))
        shape = a.shape
        return record(value, [a], lambda ts: np.reshape(ts[0], value.shape),
                      lambda g: [np.reshape(g, shape)])

    return rule


def transpose_rule(a, axes=None):
    perm = tuple(range(a.ndim))[::-1] if axes is None else tuple(ax % a.ndim for ax in axes)
    return record(np.transpose(a._value, perm), [a], lambda ts: np.transpose(ts[0], perm),
                  lambda g: [np.transpose(g, np.argsort(perm))])


def swapaxes_rule(a, axis1, axis2):
    return record(np.swapaxes(a._value, axis1, axis2), [a], lambda ts: np.swapaxes(ts[0], axis1, axis2),
                  lambda g: [np.swapaxes(g, axis1, axis2)])


def moveaxis_rule(a, source, destination):
    return record(np.moveaxis(a._value, source, destination), [a],
                  lambda ts: np.moveaxis(ts[0], source, destination),
                  lambda g: [np.moveaxis(g, destination, source)])


def broadcast_to_rule(array, shape, subok=False):
    shape0 = array.shape
    return record(np.broadcast_to(array._value, shape), [array], lambda ts: np.broadcast_to(ts[0], shape),
                  lambda g: [unbroadcast(g, shape0)])


def copy_rule(a, *args, **kwargs):
    return record(np.copy(a._value), [a], lambda ts: ts[0], lambda g: [g])


def real_rule(val):
    if not np.iscomplexobj(val._value):
        return val
    dtype = val.dtype  # Re<g, Re(dz)> = Re<g, dz> for a real g: the adjoint is g itself
    return record(np.real(val._value), [val], lambda ts: np.real(ts[0]), lambda g: [np.asarray(g, dtype)])


def imag_rule(val):
    if not np.iscomplexobj(val._value):
        return np.zeros_like(val._value)
    # Im(dz) = Re(conj(1j) * dz): the adjoint of a real g is 1j * g
    return record(np.imag(val._value), [val], lambda ts: np.imag(ts[0]), lambda g: [1j * np.asarray(g)])


def _promoted(x, dtype):
    """``x`` (real) as a node of the complex ``dtype``, whose adjoint is the real part (linear.py)."""
    return record(x._value.astype(dtype), [x], lambda ts: ts[0].astype(dtype), lambda g: [np.real(g)])


# --- gathers (gather itself is in array.py: indexing needs it) ----------------------------------
def _numbers(obj, operands, offsets):
    """The argument structure with every operand replaced by its element numbers + 1 (0: constant)."""
    if isinstance(obj, Traced):
        k = next(i for i, o in enumerate(operands) if o is obj)
        return np.arange(offsets[k] + 1, offsets[k] + 1 + obj.size).reshape(obj.shape)
    if isinstance(obj, (list, tuple)):
        return rebuild(obj, (_numbers(o, operands, offsets) for o in obj))
    return np.zeros(np.shape(obj), np.int64)


def _replaced(obj, swap):
    if isinstance(obj, Traced):
        return swap.get(id(obj), obj)
    if isinstance(obj, (list, tuple)):
        return rebuild(obj, (_replaced(o, swap) for o in obj))
    return obj


def gather_rule(func, data=(0,), **override):
    """A call whose output elements are copies of its data arguments' elements (positions ``data``).

    The call is made again on element numbers shifted by one, so that zeros the call inserts (diag,
    triu, padding) come back as -1, the constant marker."""

    def rule(*args, **kwargs):
        operands = []
        for i in data:
            if i < len(args):
                _traced_leaves(args[i], operands)
        operands = list({id(o): o for o in operands}.values())
        if not operands:  # the traced arguments are parameters (indices, counts): not differentiable
            raise NotTraceable("traced non-data argument")
        if kwargs.get("out") is not None:  # the element numbers must not land in the user's buffer
            raise NotTraceable("out=")
        value = func(*unwrap(args), **unwrap(kwargs))
        if np.asarray(value).dtype.kind in "biu" and any(o.dtype.kind not in "biu" for o in operands):
            return value  # cast to integers (dtype=int): piecewise constant, no derivative
        if np.iscomplexobj(value) and any(not np.iscomplexobj(o._value) for o in operands):
            # a gather adds adjoints of one dtype: real operands join a complex one as complex nodes
            swap = {id(o): _promoted(o, value.dtype) for o in operands if not np.iscomplexobj(o._value)}
            args = _replaced(args, swap)
            operands = [swap.get(id(o), o) for o in operands]
        offsets = np.cumsum([0] + [o.size for o in operands])
        nargs = [_numbers(a, operands, offsets) if i in data else unwrap(a) for i, a in enumerate(args)]
        kwargs = {k: v for k, v in unwrap(kwargs).items() if k != "dtype"}  # the numbers stay integers
        index = np.asarray(func(*nargs, **dict(kwargs, **override))) - 1
        return gather(value, operands, index)

    return rule


def pad_rule(array, pad_width, mode="constant", **kwargs):
    if mode not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        raise NotTraceable(f"mode={mode!r}")
    override = {"constant_values": 0} if mode == "constant" else {}
    return gather_rule(np.pad, **override)(array, pad_width, mode=mode, **kwargs)


def add_at(a, indices, b=None):
    """np.add.at(a, indices, b), in place on ``a``: recorded as a new node that ``a`` then stands for."""
    indices = plain_key(indices)
    va, vb = value_of(a), value_of(b)
    value = np.array(va, dtype=np.result_type(va, vb))
    np.add.at(value, indices, vb)
    parents = [p for p in (a, b) if isinstance(p, Traced)]
    ta, tb = isinstance(a, Traced), isinstance(b, Traced)
    bshape = np.shape(vb)

    def jvp(ts):
        ts = list(ts)
        t_a = ts.pop(0) if ta else None
        t_b = ts.pop(0) if tb else None
        out = np.zeros(value.shape, value.dtype) if t_a is None else np.array(t_a, dtype=np.result_type(t_a, value))
        if t_b is not None:
            np.add.at(out, indices, t_b)
        return out

    def vjp(g):
        return (([for_parent(g, va.dtype)] if ta else [])
                + ([for_parent(unbroadcast(g[indices], bshape), np.asarray(vb).dtype)] if tb else []))

    write_into(a, record(value, parents, jvp, vjp), call="np.add.at")


# --- elementwise selections -------------------------------------------------------------------------
def where_rule(condition, x=None, y=None):
    if x is None and y is None:  # np.where(cond): indices, a constant
        return np.where(value_of(condition))
    cond = np.asarray(value_of(condition), bool)
    vx, vy = value_of(x), value_of(y)
    value = np.where(cond, vx, vy)
    parents, sides = [], []
    for p, keep in ((x, cond), (y, ~cond)):
        if isinstance(p, Traced):
            parents.append(p)
            sides.append((keep, p.shape, p.dtype))

    def jvp(ts):
        acc = None
        for t, (keep, _, _) in zip(ts, sides):
            if t is not None:
                c = np.where(keep, t, np.zeros((), np.asarray(t).dtype))
                acc = c if acc is None else acc + c
        return acc

    def vjp(g):
        return [for_parent(unbroadcast(np.where(keep, g, np.zeros((), g.dtype)), shape), dtype)
                for keep, shape, dtype in sides]

    return record(value, parents, jvp, vjp)


def clip_rule(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue, max=np._NoValue,
              **kwargs):
    if out is not None or kwargs:
        raise NotTraceable("out=")
    lo = a_min if a_min is not np._NoValue else (min if min is not np._NoValue else None)
    hi = a_max if a_max is not np._NoValue else (max if max is not np._NoValue else None)
    # numpy's clip is minimum(maximum(a, lo), hi): the same values, the bounds' derivatives included
    out = a if lo is None else np.maximum(a, lo)
    return out if hi is None else np.minimum(out, hi)
