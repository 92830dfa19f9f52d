"""scipy.linalg.lu and a batched scipy.linalg.solve_triangular under tracing, against mpmath: an LU with
partial pivoting and triangular solves written here on exact numbers, differentiated by central
differences at 80 digits along random directions (complex ones too), and both sweeps' transpose identity."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from mp_helpers import DPS, STEP, to_mp
from trace_helpers import check_transpose

from gradcli.trace import trace

sl = pytest.importorskip("scipy.linalg")


def mp_lu(a):
    """(L, U) of one m x n object matrix by Doolittle's elimination with partial pivoting."""
    m, n = a.shape
    u, k = a.copy(), min(a.shape)
    l, perm = np.array([[mpmath.mpf(int(i == j)) for j in range(k)] for i in range(m)], dtype=object), list(range(m))
    for j in range(k):
        piv = max(range(j, m), key=lambda i: abs(u[i, j]))
        u[[j, piv]], l[[j, piv], :j], perm[j], perm[piv] = u[[piv, j]], l[[piv, j], :j], perm[piv], perm[j]
        for i in range(j + 1, m):
            l[i, j] = u[i, j] / u[j, j]
            u[i, :] = u[i, :] - l[i, j] * u[j, :]
    return l, np.triu(u[:k, :])


def mp_stack(f, a):
    """``f`` over the matrices of a stack (object arrays), results stacked likewise."""
    if a.ndim == 2:
        return f(a)
    parts = [mp_stack(f, x) for x in a]
    return tuple(np.stack([p[i] for p in parts]) for i in range(len(parts[0]))) \
        if isinstance(parts[0], tuple) else np.stack(parts)


def mp_directional(f, x, u):
    """(f(x + h u) - f(x - h u)) / 2h in mpmath, for object-array functions ``f``, as complex floats."""
    with mpmath.workdps(DPS):
        base, step = to_mp(x), to_mp(u) * STEP
        d = (np.asarray(f(base + step), dtype=object) - np.asarray(f(base - step), dtype=object)) / (2 * STEP)
        return np.vectorize(complex, otypes=[complex])(d)


def assert_sweeps(fn, mp_fn, x, seed=0, rtol=1e-10):
    t = trace(fn, {"a": x}, ["a"])
    assert t.ok, t.problems
    rng = np.random.default_rng(seed)
    u = rng.normal(size=x.shape) + (1j * rng.normal(size=x.shape) if np.iscomplexobj(x) else 0)
    want = mp_directional(mp_fn, x, u)
    got = t.jvp({"a": u})
    np.testing.assert_allclose(got, want if np.iscomplexobj(got) else want.real, rtol=rtol,
                               atol=rtol * np.max(np.abs(want)))
    check_transpose(fn, {"a": x}, ["a"])


SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 4), (2, 5, 3), (1, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("part", ["L", "U", "PL", "L of p_indices"])
def test_lu_against_mpmath(shape, part):
    a = np.random.default_rng(len(shape) * 10 + shape[-1]).normal(size=shape)
    fn = {"L": lambda a: sl.lu(a)[1], "U": lambda a: sl.lu(a)[2], "PL": lambda a: sl.lu(a, permute_l=True)[0],
          "L of p_indices": lambda a: sl.lu(a, p_indices=True)[1]}[part]
    p = sl.lu(a)[0]  # constant near the point: the pivots are not tied
    index = 1 if part == "U" else 0

    def mp_fn(x):
        factors = mp_stack(mp_lu, x)
        return p @ factors[0] if part == "PL" else factors[index]

    assert_sweeps(fn, mp_fn, a)


def test_lu_complex():
    rng = np.random.default_rng(8)
    a = rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))
    for k in (1, 2):
        assert_sweeps(lambda a, k=k: sl.lu(a)[k], lambda x, k=k: mp_lu(x)[k - 1], a)


@pytest.mark.parametrize("a, why", [(np.array([[1.0, 2.0], [-1.0, 3.0]]), "tied pivots"),
                                    (np.array([[2.0, 4.0], [1.0, 2.0]]), "singular")])
def test_lu_refused_where_it_jumps_or_has_no_derivative(a, why):
    t = trace(lambda a: sl.lu(a)[2], {"a": a}, ["a"])
    assert not t.ok and why in t.problems[0], t.problems


def mp_solve_triangular(a, b, lower, trans, unit):
    """scipy.linalg.solve_triangular's x on exact numbers: the triangle it reads, solved by mpmath."""
    n = a.shape[-1]
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri - np.diag(np.diagonal(tri)) + np.eye(n, dtype=int)
    if trans:
        tri = tri.T
    cols = b.reshape(n, -1)
    x = [mpmath.lu_solve(mpmath.matrix(tri.tolist()), mpmath.matrix(cols[:, j].tolist())) for j in range(cols.shape[1])]
    return np.array([[x[j][i] for j in range(cols.shape[1])] for i in range(n)], dtype=object).reshape(b.shape)


@pytest.mark.parametrize("a_shape, b_shape", [((3, 3), (3,)), ((2, 3, 3), (2, 3, 4)), ((3, 3), (2, 3, 2)),
                                              ((2, 3, 3), (3,)), ((2, 3, 3), (3, 1))], ids=str)
@pytest.mark.parametrize("lower, trans, unit", [(False, 0, False), (True, 1, False), (True, 0, True),
                                                 (False, "T", True)])
def test_batched_solve_triangular(a_shape, b_shape, lower, trans, unit):
    rng = np.random.default_rng(4)
    a = rng.normal(size=a_shape) + 3 * np.eye(a_shape[-1])
    b = rng.normal(size=b_shape)
    fn = lambda a, b: sl.solve_triangular(a, b, lower=lower, trans=trans, unit_diagonal=unit)  # noqa: E731
    t = trace(fn, {"a": a, "b": b}, ["a", "b"])
    assert t.ok, t.problems
    out = np.broadcast_shapes(a_shape[:-2], b_shape[:-2] if len(b_shape) > 1 else ()) + \
        ((a_shape[-1],) if len(b_shape) == 1 else b_shape[-2:])

    def mp_fn(x, y):
        aa, bb = np.broadcast_to(x, out[:-2] + a_shape[-2:]) if len(b_shape) > 1 else x, y
        if len(b_shape) > 1:
            bb = np.broadcast_to(bb, out)
            return np.stack([mp_solve_triangular(ai, bi, lower, trans, unit)
                             for ai, bi in zip(aa.reshape((-1,) + a_shape[-2:]), bb.reshape((-1,) + b_shape[-2:]))]
                            ).reshape(out)
        return np.stack([mp_solve_triangular(ai, bb, lower, trans, unit) for ai in aa.reshape((-1,) + a_shape[-2:])]
                        ).reshape(out)

    ua, ub = rng.normal(size=a_shape), rng.normal(size=b_shape)
    with mpmath.workdps(DPS):
        pa, pb, da, db = to_mp(a), to_mp(b), to_mp(ua) * STEP, to_mp(ub) * STEP
        d = (mp_fn(pa + da, pb + db) - mp_fn(pa - da, pb - db)) / (2 * STEP)
    want = np.vectorize(float)(d)
    np.testing.assert_allclose(t.jvp({"a": ua, "b": ub}), want, rtol=1e-10, atol=1e-10 * np.max(np.abs(want)))
    check_transpose(fn, {"a": a, "b": b}, ["a", "b"])
