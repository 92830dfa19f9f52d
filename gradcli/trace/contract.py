"""Contractions and norms: einsum, tensordot, dot, inner, outer, matmul, trace, np.linalg's norms.

They are multilinear: the jvp puts each operand's tangent in its place (one einsum per operand), the
vjp contracts the cotangent with the other operands back to the operand's labels. Each node keeps the
value of the numpy call itself (its own summation order), so the traced value is the plain one.
"""
from __future__ import annotations

import string

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.linear import axes_of, conj, expand, for_parent, QUIET, reduction, unbroadcast, with_value


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
            # multilinear: the adjoint contracts g with the other operands' conjugates (linear.py)
            r = np.einsum(",".join([out] + [ins[j] for j in others]) + "->" + uniq, g,
                          *[conj(vals[j]) for j in others])
            # labels only this operand has were summed away: broadcast back over them
            full = "".join(dict.fromkeys(sub))
            r = np.transpose(r, [uniq.index(c) for c in full if c in uniq])
            r = r.reshape([sizes[c] if c in uniq else 1 for c in full])
            r = np.broadcast_to(r, [sizes[c] for c in full])
            if full != sub:  # repeated labels (a diagonal): write onto it, zeros elsewhere
                z = np.zeros(np.shape(vals[i]), np.result_type(r, vals[i]))
                np.einsum(sub + "->" + full, z)[...] = r
                r = z
            res.append(for_parent(r, np.asarray(vals[i]).dtype))
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


def einsum_rule(*operands, out=None, **kwargs):
    if out is not None:
        raise NotTraceable("out=")
    value = np.einsum(*[value_of(o) for o in operands], **kwargs)
    if isinstance(operands[0], str):
        subscripts, operands = operands[0], operands[1:]
    else:  # the sublist form a, [0, 1], b, [1, 2], [0, 2]: labels 0-51 are A-Z, a-z, in numpy's order
        letters = string.ascii_uppercase + string.ascii_lowercase

        def word(sub):
            return "".join("..." if k is Ellipsis else letters[k] for k in sub)

        pairs = len(operands) // 2
        subscripts = ",".join(word(s) for s in operands[1:2 * pairs:2])
        if len(operands) % 2:
            subscripts += "->" + word(operands[-1])
        operands = operands[0:2 * pairs:2]
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
    return with_value(tensordot_rule(a, b, ([-1], [max(nb - 2, 0)])), np.dot(value_of(a), value_of(b)))


def outer_rule(a, b, out=None):
    if out is not None:
        raise NotTraceable("out=")
    value = np.outer(value_of(a), value_of(b))
    a, b = np.ravel(a), np.ravel(b)
    return contract(value, "i,j->ij", [a, b])


def inner_rule(a, b):
    if np.ndim(value_of(a)) == 0 or np.ndim(value_of(b)) == 0:  # a scalar scales the other operand
        return np.multiply(a, b)
    return with_value(tensordot_rule(a, b, ([-1], [-1])), np.inner(value_of(a), value_of(b)))


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
            ga = unbroadcast(np.matmul(g2, np.swapaxes(conj(b2), -1, -2)), a2.shape).reshape(sa)
            res.append(for_parent(ga, a.dtype))
        if isinstance(b, Traced):
            gb = unbroadcast(np.matmul(np.swapaxes(conj(a2), -1, -2), g2), b2.shape).reshape(sb)
            res.append(for_parent(gb, b.dtype))
        return res

    return record(value, [p for p in (a, b) if isinstance(p, Traced)], jvp, vjp)


# --- norms: np.linalg.norm, vector_norm, matrix_norm -------------------------------------------------
def near(values):
    """The gap (between singular or eigenvalues, or to zero), as a fraction of the largest, below which
    it counts as none: vectors are computed to about eps/gap, so derivatives of size 1/gap to eps/gap^2,
    no digit at all below sqrt(eps) of the values' dtype (also used by gradcli.trace.linalg)."""
    return np.sqrt(np.finfo(values.dtype).eps)


def _vector_weights(v, value, p, axes, keepdims):
    """w with d norm = sum(w * dx) over ``axes``, for the vector p-norm (its real part for complex x)."""
    if p == 0:
        return np.zeros(v.shape, np.result_type(value))  # the count of nonzeros: piecewise constant
    if np.iscomplexobj(v) and p != 2:
        raise NotTraceable(f"ord={p!r} of a complex array")
    kept = expand(value, v.shape, axes, keepdims)
    with np.errstate(**QUIET):  # a zero vector (a zero entry, for p < 1) is a kink: inf or NaN, on purpose
        if p == 2:
            return np.conjugate(v) / kept
        if p in (np.inf, -np.inf):  # the extreme entries share the derivative, as np.max's ties do
            hit = np.abs(v) == kept
            return np.sign(v) * hit / np.sum(hit, axis=axes, keepdims=True, dtype=v.dtype)
        return np.sign(v) * (np.abs(v) / kept) ** (p - 1)


def _matrix_weights(v, ord, axis):
    """w with d norm = sum(w * dx) over the two ``axis`` (rows, columns), ord not None or 'fro'."""
    r, c = (ax % v.ndim for ax in axis)
    x = np.moveaxis(v, (r, c), (-2, -1))
    if np.iscomplexobj(x):
        raise NotTraceable(f"ord={ord!r} of a complex matrix")
    if ord in ("nuc", 2, -2):  # d sum(s) = U V^T; d s_i = u_i v_i^T where s_i is apart from the others
        u, s, vt = np.linalg.svd(x, full_matrices=False)
        tol = near(s) * s[..., :1]
        gap = s[..., :1] - s[..., 1:2] if ord == 2 else s[..., -2:-1] - s[..., -1:]
        if np.any(s[..., :1] == 0) or ord != 2 and np.any(s[..., -1:] <= tol):
            raise NotTraceable(f"ord={ord!r} at a zero singular value")
        if ord != "nuc" and np.any(gap <= tol):
            raise NotTraceable(f"ord={ord!r} at a repeated singular value")
        pick = slice(None) if ord == "nuc" else slice(0, 1) if ord == 2 else slice(-1, None)
        w = u[..., :, pick] @ vt[..., pick, :]
    else:  # 1, -1: the largest, smallest absolute column sum; inf, -inf: row sum. Ties share, as np.max's
        ax = -2 if ord in (1, -1) else -1
        sums = np.sum(np.abs(x), axis=ax, keepdims=True)
        hit = sums == (np.max if ord > 0 else np.min)(sums, axis=-3 - ax, keepdims=True)
        w = np.sign(x) * hit / np.sum(hit, axis=-3 - ax, keepdims=True, dtype=x.dtype)
    return np.moveaxis(w, (-2, -1), (r, c))


def norm_rule(x, ord=None, axis=None, keepdims=False):
    v = x._value
    value = np.linalg.norm(v, ord=ord, axis=axis, keepdims=keepdims)
    axes = axes_of(axis, v.ndim)
    if len(axes) == 2 and ord not in (None, "fro"):
        w = _matrix_weights(v, ord, (0, 1) if axis is None else axis)
    else:  # a vector norm; None and 'fro' are the 2-norm of the axes flattened
        w = _vector_weights(v, value, 2 if ord in (None, "fro") else ord, axes, keepdims)
    return reduction(x, axes, keepdims, value, w)


def vector_norm_rule(x, /, *, axis=None, keepdims=False, ord=2):
    v = x._value
    value = np.linalg.vector_norm(v, axis=axis, keepdims=keepdims, ord=ord)
    axes = axes_of(axis, v.ndim)
    return reduction(x, axes, keepdims, value, _vector_weights(v, value, ord, axes, keepdims))


def matrix_norm_rule(x, /, *, keepdims=False, ord="fro"):
    value = np.linalg.matrix_norm(x._value, keepdims=keepdims, ord=ord)
    return with_value(norm_rule(x, ord, (-2, -1), keepdims), value)


def trace_rule(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise NotTraceable("out=")
    node = np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
    return with_value(node, np.trace(a._value, offset, axis1, axis2, dtype=dtype))
