"""Complex Hermitian cholesky (numpy's and scipy's, both triangles) under tracing: the jvp along random
complex directions against mpmath's cholesky of the Hermitian matrix LAPACK reads, differentiated at 80
digits, and the vjp as its adjoint under Re<a, b> (PyTorch's convention)."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from mp_helpers import DPS, STEP, to_mp
from trace_helpers import check_transpose

from gradcli.trace import trace

sl = pytest.importorskip("scipy.linalg")


def mp_cholesky(a, lower_read):
    """L of the Hermitian matrix made from the triangle of ``a`` that is read (its diagonal's real part)."""
    tri = np.tril(a) if lower_read else np.vectorize(mpmath.conj, otypes=[object])(np.triu(a)).T
    n = a.shape[0]
    h = [[tri[i][j] if i > j else (mpmath.re(tri[i][i]) if i == j else mpmath.conj(tri[j][i])) for j in range(n)]
         for i in range(n)]
    low = mpmath.cholesky(mpmath.matrix(h))
    return np.array([[low[i, j] for j in range(n)] for i in range(n)], dtype=object)


CASES = {
    "numpy": (lambda a: np.linalg.cholesky(a), True, False),
    "numpy upper": (lambda a: np.linalg.cholesky(a, upper=True), False, True),
    "scipy": (lambda a: sl.cholesky(a), False, True),  # scipy's default: upper
    "scipy lower": (lambda a: sl.cholesky(a, lower=True), True, False),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("n", [1, 2, 4])
def test_complex_cholesky(case, n):
    fn, lower_read, upper_out = CASES[case]
    rng = np.random.default_rng(n)
    b = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
    a = b @ b.conj().T + n * np.eye(n)
    t = trace(fn, {"a": a}, ["a"])
    assert t.ok, t.problems
    u = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))  # not Hermitian: the unread part moves too
    with mpmath.workdps(DPS):
        x, h = to_mp(a), to_mp(u) * STEP
        d = (mp_cholesky(x + h, lower_read) - mp_cholesky(x - h, lower_read)) / (2 * STEP)
    want = np.vectorize(complex, otypes=[complex])(d)
    want = want.conj().T if upper_out else want
    np.testing.assert_allclose(t.jvp({"a": u}), want, rtol=1e-11, atol=1e-11 * np.max(np.abs(want)))
    check_transpose(fn, {"a": a}, ["a"])
