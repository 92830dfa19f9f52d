"""numpy.linalg's pinv and lstsq: differentiable where the rank cannot change (refused near a change),
with the formulas of G. Golub and V. Pereyra, "The differentiation of pseudo-inverses" (1973), on the
helpers of :mod:`gradcli.trace.linalg`."""
from __future__ import annotations

import functools
import inspect

import numpy as np

from gradcli.trace.array import Traced, record, value_of
from gradcli.trace.contract import near
from gradcli.trace.linear import for_parent
from gradcli.trace.linalg import (hermitian_adjoint, hermitian_of, mH, node, plain, refuse_if, separated,
                                  sv_node)


def _full_rank(s, rcond):
    """Refuse singular values ``s`` of a (nearly) rank-deficient matrix, or with one near the cutoff
    ``rcond * s_max`` below which numpy drops it: the result jumps there."""
    rcond = 0.0 if rcond is None or isinstance(rcond, str) else rcond  # numpy 1's "warn": its default
    tol = np.maximum(near(s), 2 * np.asarray(rcond, float))
    refuse_if(s[..., -1:] <= tol[..., None] * s[..., :1], "a rank-deficient (or nearly) matrix")


_PINV = inspect.signature(np.linalg.pinv)
_LSTSQ = inspect.signature(np.linalg.lstsq)


def pinv_rule(a, *args, **kwargs):
    v, = plain(a, complex_=True)
    p = np.linalg.pinv(v, *args, **kwargs)
    opts = _PINV.bind(v, *args, **kwargs).arguments
    rcond = opts.get("rcond", opts.get("rtol"))
    if opts.get("hermitian", False):
        return _hermitian_pinv(a, p, rcond)
    _full_rank(np.linalg.svd(v, compute_uv=False), rcond)
    pt = mH(p)

    def jvp(t):  # dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P: not holomorphic
        tt = mH(t)
        return (-_chain(p, t, p) + _chain(p, pt, tt) - _chain(p, pt, tt, v, p)
                + _chain(tt, pt, p) - _chain(p, v, tt, pt, p))

    def vjp(g):
        gt = mH(g)
        return (-_chain(pt, g, pt) + _chain(gt, p, pt) - _chain(v, p, gt, p, pt)
                + _chain(pt, p, gt) - _chain(pt, p, gt, p, v))

    return node(p, a, jvp, vjp)


def _hermitian_pinv(a, p, rcond):
    """pinv(a, hermitian=True) reads the Hermitian matrix S of a's lower triangle (numpy's eigh); where
    its rank cannot change (refused otherwise) P is S^-1, so dP = -P dS P."""
    s = np.sort(np.abs(np.linalg.eigvalsh(value_of(a))), axis=-1)[..., ::-1]
    _full_rank(s, rcond)
    return node(p, a, lambda t: -(p @ hermitian_of(t, True) @ p),
                lambda g: hermitian_adjoint(-(mH(p) @ g @ mH(p)), True))


def _chain(*ms):
    """The product of the stacked matrices ``ms`` in the order with the fewest multiplications (multi_dot's
    rule, which does not stack): for a tall or wide A the m x m (n x n) projections never form."""
    dims = [m.shape[-2] for m in ms] + [ms[-1].shape[-1]]

    @functools.cache
    def best(i, j):  # (multiplications, split) for ms[i] ... ms[j]
        if i == j:
            return 0, i
        return min((best(i, k)[0] + best(k + 1, j)[0] + dims[i] * dims[k + 1] * dims[j + 1], k)
                   for k in range(i, j))

    def product(i, j):
        k = best(i, j)[1]
        return ms[i] if i == j else product(i, k) @ product(k + 1, j)

    return product(0, len(ms) - 1)


def lstsq_rule(a, b, *args, **kwargs):
    av, bv = plain(a, b, complex_=True)
    x, resid, rank, s = np.linalg.lstsq(av, bv, *args, **kwargs)
    _full_rank(s, _LSTSQ.bind(av, bv, *args, **kwargs).arguments.get("rcond"))
    vec = bv.ndim == 1
    x2, b2 = (x[:, None], bv[:, None]) if vec else (x, bv)
    r2 = b2 - av @ x2
    p = np.linalg.pinv(av)
    pt, ta_on, tb_on = mH(p), isinstance(a, Traced), isinstance(b, Traced)
    parents = [q for q in (a, b) if isinstance(q, Traced)]

    def split(ts):
        tb = ts[-1] if tb_on else None
        return (ts[0] if ta_on else None), (None if tb is None else np.reshape(tb, b2.shape))

    def out(ga, gb):  # each parent's cotangent: a real one's real part
        return (([for_parent(ga, av.dtype)] if ta_on else [])
                + ([for_parent(np.reshape(gb, bv.shape), bv.dtype)] if tb_on else []))

    def x_jvp(ts):  # x = A^+ b: dx = dA^+ b + A^+ db, with dA^+ as in pinv_rule
        ta, tb = split(ts)
        dx = 0 if tb is None else p @ tb
        if ta is not None:
            w = mH(ta) @ (pt @ x2)
            dx = dx - p @ (ta @ x2) + p @ (pt @ (mH(ta) @ r2)) + w - p @ (av @ w)
        return dx[:, 0] if vec else dx

    def x_vjp(g):
        g = np.reshape(g, x2.shape)
        gb = pt @ g
        return out(-gb @ mH(x2) + r2 @ mH(p @ gb) + (pt @ x2) @ mH(g - p @ (av @ g)), gb)

    def r_jvp(ts):  # d |b - A x|^2 = 2 Re(r^H (db - dA x)), as A^H r = 0 at the solution
        ta, tb = split(ts)
        d = (0 if tb is None else tb) - (0 if ta is None else ta @ x2)
        return 2 * np.real(np.sum(np.conjugate(r2) * d, axis=0))

    def r_vjp(g):
        gb = 2 * r2 * np.real(np.asarray(g))
        return out(-gb @ mH(x2), gb)

    if ta_on:
        separated(s, "singular values")
        s = sv_node(a, s, functools.cache(lambda: np.linalg.svd(av, full_matrices=False)[::2]))
    if resid.size:  # numpy gives residuals only for a tall full-rank A
        resid = record(resid, parents, r_jvp, r_vjp)
    return record(x, parents, x_jvp, x_vjp), resid, rank, s


def routes(d) -> dict:
    """numpy.linalg's pinv and lstsq -> Route, built with ``d(impl)``."""
    return {np.linalg.pinv: d(pinv_rule), np.linalg.lstsq: d(lstsq_rule)}
