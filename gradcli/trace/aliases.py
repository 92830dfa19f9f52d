"""numpy 2's array-API names (np.linalg.outer, matmul, tensordot, vecdot, trace, diagonal, cross,
matrix_transpose; np.vecdot, np.matrix_transpose, np.cumulative_sum), the small polynomial helpers (polymul,
polyder, polyint, poly, roots, polyfit), cond, tensorsolve, tensorinv, and the ufuncs copysign, modf and divmod.

Each rule keeps numpy's own value and takes the derivative from the same function written as routed
calls on the Traced arguments (``linear.with_value``, which refuses a composition of another shape or
dtype than numpy's result: then the check falls back to numerics rather than trust it).
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, unwrap, value_of
from gradcli.trace.linear import with_value
from gradcli.trace.rules import Elementwise


def _composed(func, compose):
    def rule(*args, **kwargs):
        value = func(*unwrap(args), **unwrap(kwargs))  # first: numpy's own errors, as untraced
        res = compose(*args, **kwargs)
        return with_value(res, value) if isinstance(res, Traced) else value

    return rule


def _vecdot(x1, x2, axis=-1):
    return np.sum(np.conjugate(x1) * x2, axis=axis)


def _cumulative_sum(x, axis=None, dtype=None, out=None, include_initial=False):
    if dtype is not None or out is not None:
        raise NotTraceable("dtype= or out=")
    axis = 0 if axis is None else axis
    c = np.cumsum(x, axis=axis)
    if not include_initial:
        return c
    shape = list(np.shape(value_of(c)))
    shape[axis] = 1
    return np.concatenate([np.zeros(shape), c], axis=axis)


def _one_d(p, name):
    if isinstance(p, np.poly1d) or np.ndim(value_of(p)) != 1:
        raise NotTraceable(f"{name} not a 1-d array")
    return p


def _polyder(p, m=1):
    p = _one_d(p, "p")
    for _ in range(m):
        n = np.shape(value_of(p))[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


def _polyint(p, m=1, k=None):
    p = _one_d(p, "p")
    ks = np.zeros(m) if k is None else np.atleast_1d(k)
    for i in range(m):
        p = np.concatenate([p / np.arange(np.shape(value_of(p))[0], 0, -1), ks[i:i + 1]])
    return p


def _poly(seq_of_zeros):
    a = np.ones(1)
    for i in range(np.shape(value_of(_one_d(seq_of_zeros, "seq_of_zeros")))[0]):
        a = np.convolve(a, np.concatenate([np.ones(1), -seq_of_zeros[i:i + 1]]))
    return a


def _roots(p):
    """The eigenvalues of the companion matrix, as numpy computes them (so in numpy's order)."""
    pv = np.asarray(value_of(_one_d(p, "p")))
    nz = np.flatnonzero(pv)
    if nz.size == 0 or nz[0] != 0 or nz[-1] != pv.size - 1:
        raise NotTraceable("leading or trailing zero coefficients")
    n = pv.size - 1
    if n < 1:
        return np.zeros(0)
    top = (-p[1:] / p[0])[None, :]
    return np.linalg.eigvals(np.concatenate([top, np.eye(n - 1, n)]) if n > 1 else top)


def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares fit on the Vandermonde matrix (numpy scales its columns first: the same
    solution, other rounding); full= and cov= are left to numerics."""
    if full or cov:
        raise NotTraceable("full= or cov=")
    lhs, rhs = np.vander(_one_d(x, "x"), deg + 1), y
    if w is not None:
        lhs, rhs = lhs * w[:, None], (rhs * w if np.ndim(value_of(y)) == 1 else rhs * w[:, None])
    return np.linalg.lstsq(lhs, rhs, rcond=rcond)[0]


def _cond(x, p=None):
    if p in (None, 2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    return np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1))


def _tensorsolve(a, b, axes=None):
    if axes is not None:
        raise NotTraceable("axes=")
    bshape, ashape = np.shape(value_of(b)), np.shape(value_of(a))
    rows = math.prod(bshape)
    x = np.linalg.solve(np.reshape(a, (rows, -1)), np.reshape(b, (rows,)))
    return np.reshape(x, ashape[len(bshape):])


def _tensorinv(a, ind=2):
    shape = np.shape(value_of(a))
    inv = np.linalg.inv(np.reshape(a, (math.prod(shape[:ind]), -1)))
    return np.reshape(inv, shape[ind:] + shape[:ind])


def _modf(x, **kwargs):
    """(x - trunc(x), trunc(x)): the fraction has slope 1, the integral part is piecewise constant."""
    if kwargs:
        raise NotTraceable(", ".join(sorted(kwargs)) + "=")
    frac, whole = np.modf(value_of(x))
    return with_value(x - whole, frac), whole


def _divmod(x, y, **kwargs):
    """(floor(x / y), x - y floor(x / y)): the quotient piecewise constant, the remainder's slopes 1 and
    -floor(x / y)."""
    if kwargs:
        raise NotTraceable(", ".join(sorted(kwargs)) + "=")
    q, r = np.divmod(value_of(x), value_of(y))
    return q, with_value(x - y * q, r)


def _copysign_x(ans, x, y):
    return np.where(np.signbit(x) == np.signbit(y), 1.0, -1.0)


def routes(d) -> dict:
    """numpy callable -> Route, built with ``d(impl)``; the names numpy 1 lacks are left out."""
    table = {
        "linalg.outer": lambda x1, x2: np.outer(x1, x2),
        "linalg.matmul": lambda x1, x2: np.matmul(x1, x2),
        "linalg.tensordot": lambda x1, x2, axes=2: np.tensordot(x1, x2, axes),
        "linalg.vecdot": _vecdot, "vecdot": _vecdot,
        "linalg.trace": lambda x, offset=0, dtype=None: np.trace(x, offset, -2, -1, dtype),
        "linalg.diagonal": lambda x, offset=0: np.diagonal(x, offset, -2, -1),
        "linalg.cross": lambda x1, x2, axis=-1: np.cross(x1, x2, axis=axis),
        "linalg.matrix_transpose": lambda x: np.swapaxes(x, -1, -2),
        "matrix_transpose": lambda x: np.swapaxes(x, -1, -2),
        "cumulative_sum": _cumulative_sum,
        "polymul": lambda a1, a2: np.convolve(_one_d(a1, "a1"), _one_d(a2, "a2")),
        "polyder": _polyder, "polyint": _polyint, "poly": _poly, "roots": _roots, "polyfit": _polyfit,
        "linalg.cond": _cond, "linalg.tensorsolve": _tensorsolve, "linalg.tensorinv": _tensorinv,
    }
    out = {}
    for name, compose in table.items():
        owner, _, attr = name.rpartition(".")
        func = getattr(getattr(np, owner) if owner else np, attr, None)
        if func is not None:
            out[func] = d(_composed(func, compose))
    out[np.copysign] = d(Elementwise(np.copysign, (_copysign_x, lambda ans, x, y: 0.0)))
    out[np.modf] = d(_modf)
    out[np.divmod] = d(_divmod)
    return out
