"""Contractions and norms: einsum, tensordot, dot, inner, outer, matmul, trace, np.linalg.norm.

They are multilinear: the jvp puts each operand's tangent in its place (one einsum per operand), the
vjp contracts the cotangent with the other operands back to the operand's labels. Each node keeps the
value of the numpy call itself (its own summation order), so the traced value is the plain one.
"""
from __future__ import annotations

import string

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.linear import axes_of, expand, reduction, unbroadcast


# --- contractions -----------------------------------------------------------------------------------
def contract(value, subscripts, operands):
    """A node for ``einsum(subscripts, *operands)`` (explicit output, no ellipsis), value given."""
    ins, out = subscripts.split("->")
    ins = ins.split(",")
    vals = [value_of(o) for o in operands]
    idx = [i for i, o in enumerate(operands) if isinstance(o, Traced)]
    sizes = {}
    for sub, v in zip(ins, vals):
        for c, n in zip(sub, np.shape(v)):
            if sizes.setdefault(c, n) != n:
                raise NotTraceable("broadcasting dimensions")

    def jvp(ts):
        acc = None
        for k, i in enumerate(idx):
            if ts[k] is not None:
                args = vals[:i] + [ts[k]] + vals[i + 1:]
                c = np.einsum(subscripts, *args)
                acc = c if acc is None else acc + c
        return acc

    def vjp(g):
        res = []
        for i in idx:
            sub, others = ins[i], [j for j in range(len(vals)) if j != i]
            seen = out + "".join(ins[j] for j in others)
            uniq = "".join(dict.fromkeys(c for c in sub if c in seen))
            r = np.einsum(",".join([out] + [ins[j] for j in others]) + "->" + uniq, g, *[vals[j] for j in others])
            # labels only this operand has were summed away: broadcast back over them
            full = "".join(dict.fromkeys(sub))
            r = np.transpose(r, [uniq.index(c) for c in full if c in uniq])
            r = r.reshape([sizes[c] if c in uniq else 1 for c in full])
            r = np.broadcast_to(r, [sizes[c] for c in full])
            if full != sub:  # repeated labels (a diagonal): write onto it, zeros elsewhere
                z = np.zeros(np.shape(vals[i]), np.result_type(r, vals[i]))
                np.einsum(sub + "->" + full, z)[...] = r
                r = z
            res.append(r)
        return res

    return record(value, [operands[i] for i in idx], jvp, vjp)


_LETTERS = string.ascii_letters


def _explicit(subscripts, shapes):
    """einsum subscripts with the ellipsis spelled out and the output written, as einsum reads them."""
    subscripts = subscripts.replace(" ", "")
    ins, out = (subscripts.split("->") + [None])[:2]
    ins = ins.split(",")
    if len(ins) != len(shapes):
        raise NotTraceable("operand count")
    free = [c for c in _LETTERS if c not in subscripts]
    ell = max((len(s) - len(sub.replace("...", "")) for sub, s in zip(ins, shapes) if "..." in sub), default=0)
    fill = "".join(free[:ell])
    ins = [sub.replace("...", fill[ell - (len(s) - len(sub.replace("...", ""))):]) for sub, s in zip(ins, shapes)]
    if out is None:
        counts = {c: "".join(ins).count(c) for c in "".join(ins)}
        out = fill + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in fill))
    else:
        out = out.replace("...", fill)
    return ",".join(ins) + "->" + out


def einsum_rule(subscripts, *operands, out=None, **kwargs):
    if not isinstance(subscripts, str) or out is not None:
        raise NotTraceable("operand-list form" if out is None else "out=")
    value = np.einsum(subscripts, *[value_of(o) for o in operands], **kwargs)
    return contract(value, _explicit(subscripts, [np.shape(value_of(o)) for o in operands]), operands)


def tensordot_rule(a, b, axes=2):
    na, nb = np.ndim(value_of(a)), np.ndim(value_of(b))
    if isinstance(axes, int):
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    ax_a, ax_b = [x % na for x in ax_a], [x % nb for x in ax_b]
    la, lb = list(_LETTERS[:na]), list(_LETTERS[na: na + nb])
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    out = [c for i, c in enumerate(la) if i not in ax_a] + [c for j, c in enumerate(lb) if j not in ax_b]
    value = np.tensordot(value_of(a), value_of(b), axes)
    return contract(value, "".join(la) + "," + "".join(lb) + "->" + "".join(out), [a, b])


def dot_rule(a, b, out=None):
    if out is not None:
        raise NotTraceable("out=")
    if np.ndim(value_of(a)) == 0 or np.ndim(value_of(b)) == 0:
        return np.multiply(a, b)
    # dot sums the last axis of a against the second-to-last of b (the only one when b is 1-D)
    nb = np.ndim(value_of(b))
    return _with_value(tensordot_rule(a, b, ([-1], [max(nb - 2, 0)])), np.dot(value_of(a), value_of(b)))


def _with_value(node, value):
    node._value = np.asarray(value)  # the call's own value (its summation order); same derivative
    return node


def outer_rule(a, b, out=None):
    if out is not None:
        raise NotTraceable("out=")
    value = np.outer(value_of(a), value_of(b))
    a, b = np.ravel(a), np.ravel(b)
    return contract(value, "i,j->ij", [a, b])


def inner_rule(a, b):
    return _with_value(tensordot_rule(a, b, ([-1], [-1])), np.inner(value_of(a), value_of(b)))


def matmul_rule(a, b, **kwargs):
    if kwargs:
        raise NotTraceable(", ".join(kwargs) + "=")
    va, vb = value_of(a), value_of(b)
    value = np.matmul(va, vb)
    sa, sb = np.shape(va), np.shape(vb)
    # 1-D operands are promoted to matrices, and the batch axes broadcast, exactly as matmul does
    a2 = va if len(sa) > 1 else np.reshape(va, (1,) + sa)
    b2 = vb if len(sb) > 1 else np.reshape(vb, sb + (1,))

    def lift(g):
        g = np.asarray(g)
        if len(sa) == 1 and len(sb) == 1:  # a dot product: the cotangent is a scalar
            return np.reshape(g, (1, 1))
        if len(sa) == 1:
            g = np.expand_dims(g, -2)
        if len(sb) == 1:
            g = np.expand_dims(g, -1)
        return g

    def jvp(ts):
        acc = None
        k = 0
        if isinstance(a, Traced):
            if ts[0] is not None:
                acc = np.matmul(ts[0], vb)
            k = 1
        if isinstance(b, Traced) and ts[k] is not None:
            c = np.matmul(va, ts[k])
            acc = c if acc is None else acc + c
        return acc

    def vjp(g):
        g2, res = lift(g), []
        if isinstance(a, Traced):
            res.append(unbroadcast(np.matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape).reshape(sa))
        if isinstance(b, Traced):
            res.append(unbroadcast(np.matmul(np.swapaxes(a2, -1, -2), g2), b2.shape).reshape(sb))
        return res

    return record(value, [p for p in (a, b) if isinstance(p, Traced)], jvp, vjp)


# --- np.linalg.norm ----------------------------------------------------------------------------------
def norm_rule(x, ord=None, axis=None, keepdims=False):
    v = x._value
    value = np.linalg.norm(v, ord=ord, axis=axis, keepdims=keepdims)
    nax = v.ndim if axis is None else (1 if np.isscalar(axis) else len(axis))
    axes = axes_of(axis, v.ndim)
    if ord is None and axis is None or nax == 1 and ord in (None, 2) or nax == 2 and ord in (None, "fro"):
        kept = expand(value, v.shape, axes, keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):  # norm 0 is a kink
            w = np.conjugate(v) / kept if np.iscomplexobj(v) else v / kept
    elif nax == 1 and ord == 1 and not np.iscomplexobj(v):
        w = np.sign(v)
    elif nax == 1 and ord in (np.inf, -np.inf) and not np.iscomplexobj(v):
        hit = np.abs(v) == expand(value, v.shape, axes, keepdims)
        w = np.sign(v) * hit / np.sum(hit, axis=axes, keepdims=True)
    elif nax == 2 and ord == 2 and v.ndim == 2 and not np.iscomplexobj(v):
        u, s, vt = np.linalg.svd(v)
        w = np.outer(u[:, 0], vt[0])  # d sigma_max = u1^T dA v1 (a kink where sigma_1 = sigma_2)
    else:
        raise NotTraceable(f"ord={ord!r}")
    return reduction(x, axes if axis is not None else None, keepdims, value, w)


def trace_rule(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise NotTraceable("out=")
    node = np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
    return _with_value(node, np.trace(a._value, offset, axis1, axis2, dtype=dtype))
