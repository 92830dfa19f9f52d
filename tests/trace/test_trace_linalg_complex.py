"""numpy.linalg on complex matrices: every rule against central differences along the real and the
imaginary parts (test_trace_complex's check), complex and real-with-complex operands, and refusals."""
from __future__ import annotations

import numpy as np
import pytest
from test_trace_complex import check_complex, check_transpose_re
from trace_helpers import check_against_numerics, check_transpose

from gradcli.trace import trace

la = np.linalg
rng = np.random.default_rng(11)


def _c(*shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


Z = _c(3, 3) + 3 * np.eye(3)  # well conditioned
ZS = _c(2, 3, 3) + 3 * np.eye(3)  # stacked
X = rng.normal(size=(3, 3)) + 3 * np.eye(3)
BZ, BZ2 = _c(3), _c(3, 2)
BX = rng.normal(size=(3, 2))
T = _c(4, 3)  # tall
H = Z + Z.conj().T  # Hermitian


@pytest.mark.parametrize("fn, inputs", [
    (lambda a: la.inv(a), {"a": Z}), (lambda a: la.inv(a), {"a": ZS}), (lambda a: la.inv(a), {"a": Z[:1, :1]}),
    (lambda a, b: la.solve(a, b), {"a": Z, "b": BZ}), (lambda a, b: la.solve(a, b), {"a": ZS, "b": BZ2}),
    (lambda a, b: la.solve(a, b), {"a": X, "b": BZ2}), (lambda a, b: la.solve(a, b), {"a": Z, "b": BX}),
    (lambda a, b: la.solve(a, b), {"a": X, "b": BZ}),
    (lambda a: la.det(a), {"a": Z}), (lambda a: la.det(a), {"a": ZS}), (lambda a: la.det(a), {"a": Z[:1, :1]}),
    (lambda a: la.slogdet(a)[1], {"a": Z}), (lambda a: la.slogdet(a)[1], {"a": ZS}),
    (lambda a: la.slogdet(a)[0], {"a": Z}), (lambda a: la.slogdet(a)[0], {"a": ZS}),
    (lambda a: la.slogdet(a).sign * np.exp(la.slogdet(a).logabsdet), {"a": Z}),
    (lambda a: la.matrix_power(a, 3), {"a": Z}), (lambda a: la.matrix_power(a, -2), {"a": ZS}),
    (lambda a: la.matrix_power(a, 1), {"a": Z}), (lambda a: la.matrix_power(a, 0) * a, {"a": Z}),
    (lambda a: la.pinv(a), {"a": T}), (lambda a: la.pinv(a), {"a": _c(2, 2, 4)}), (lambda a: la.pinv(a), {"a": Z}),
    (lambda a: la.eigvalsh(a), {"a": H}), (lambda a: la.eigvalsh(a, "U"), {"a": H}),
    (lambda a: la.eigvalsh(a), {"a": Z}),  # the lower triangle read as Hermitian, Im of the diagonal ignored
    (lambda a: la.eigvalsh(a, UPLO="U"), {"a": ZS}),
    (lambda a: la.svd(a, compute_uv=False), {"a": T}), (lambda a: la.svd(a, False, False), {"a": _c(2, 2, 3)}),
    (lambda a: la.svdvals(a), {"a": T}), (lambda a: la.svdvals(a), {"a": T[:1]}),
], ids=["inv", "inv-stacked", "inv-1x1", "solve", "solve-stacked", "solve-real-a", "solve-real-b",
        "solve-real-a-vec", "det", "det-stacked", "det-1x1", "logabsdet", "logabsdet-stacked", "sign",
        "sign-stacked", "sign*exp(logabsdet)", "power3", "power-2", "power1", "power0", "pinv-tall", "pinv-wide",
        "pinv-square", "eigvalsh", "eigvalsh-U", "eigvalsh-lower-triangle", "eigvalsh-U-stacked", "svd-values",
        "svd-values-stacked", "svdvals", "svdvals-1-row"])
def test_complex_rules_against_differences(fn, inputs):
    check_complex(fn, inputs, list(inputs))
    check_transpose_re(fn, inputs, list(inputs))
    check_transpose(fn, inputs, list(inputs))


@pytest.mark.parametrize("fn", [
    lambda a: la.inv(a) * (1 + 2j), lambda a: la.solve(a, BZ), lambda a: la.det(a * 1j + a.T),
    lambda a: la.slogdet(a + 1j * a.T)[0], lambda a: la.slogdet(a + 1j)[1], lambda a: la.matrix_power(a, 2) * 1j,
    lambda a: la.pinv(a[:, :2]) * 1j, lambda a: la.eigvalsh(a + 1j * a.T), lambda a: la.svdvals(a - 1j * a.T),
    lambda a: la.inv(a) @ BZ2,
], ids=["inv", "solve", "det", "sign", "logabsdet", "power", "pinv", "eigvalsh", "svdvals", "inv@complex"])
def test_real_matrix_in_a_complex_computation(fn):
    t = check_complex(fn, {"a": X}, ["a"])
    assert t.vjp(np.ones(t.value.shape, t.value.dtype))["a"].dtype == np.float64


def test_real_loss_of_real_inputs_through_complex_linalg():
    def loss(x, y):
        z = x + 1j * y
        s, l = la.slogdet(z)
        return (np.abs(la.det(z)) + l + np.real(s) + np.sum(np.abs(la.solve(z, y[0])) ** 2)
                + np.sum(la.eigvalsh(z @ z.conj().T)) + np.sum(la.svdvals(z)) + np.real(np.trace(la.inv(z))))

    check_against_numerics(loss, {"x": X, "y": rng.normal(size=(3, 3))}, ["x", "y"])


def test_closed_forms():
    g = trace(lambda a: la.det(a), {"a": Z}, ["a"]).vjp(np.array(1.0 + 0j))["a"]
    np.testing.assert_allclose(g, np.conj(la.det(Z) * la.inv(Z).T), rtol=1e-12)
    g = trace(lambda a: la.slogdet(a)[1], {"a": Z}, ["a"]).gradient()["a"]
    np.testing.assert_allclose(g, la.inv(Z).conj().T, rtol=1e-12)
    g = trace(lambda a: np.sum(la.eigvalsh(a)), {"a": H}, ["a"]).gradient()["a"]  # Re of the trace
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)
    w = np.array([[0.0, 1.0], [1.0, 0.0]])
    g = trace(lambda a: la.det(a), {"a": w * 1j}, ["a"]).vjp(np.array(1.0 + 0j))["a"]  # det(iW) = 1
    np.testing.assert_allclose(g, np.conj(-(w * 1j)), atol=1e-12)  # cof of [[0, i], [i, 0]] = -A


def test_det_at_a_singular_complex_matrix():
    a = np.outer(_c(3), _c(3))  # rank one: cofactors all zero
    t = check_complex(lambda a: la.det(a), {"a": a}, ["a"])
    np.testing.assert_allclose(t.vjp(np.array(1.0 + 0j))["a"], 0, atol=1e-12)
    r2 = a + np.outer(_c(3), _c(3))  # rank two: det is 0, its gradient not
    check_complex(lambda a: la.det(a), {"a": r2}, ["a"])


@pytest.mark.parametrize("fn, a, call", [
    (lambda a: la.eigh(a)[0], np.eye(3) * (1 + 0j), "np.linalg.eigh (repeated eigenvalues)"),
    (lambda a: la.eigh(a).eigenvectors, np.diag([1.0, 1.0, 2.0]) + 0j, "np.linalg.eigh (repeated eigenvalues)"),
    (lambda a: la.svd(a)[1], T, "np.linalg.svd (full_matrices=True on a non-square matrix"),
    (lambda a: la.svd(a)[0], np.eye(3) * 1j, "np.linalg.svd (repeated singular values)"),
    (lambda a: la.qr(a)[1], T.T, "np.linalg.qr (more columns than rows)"),
    (lambda a: la.lstsq(a, BZ[:3].repeat(2)[:4])[0], np.outer(_c(4), _c(3)), "np.linalg.lstsq (a rank-deficient"),
    (lambda a: la.slogdet(a)[1], Z * [[1], [1], [0]], "np.linalg.slogdet (a singular matrix"),
    (lambda a: la.eigvalsh(a), np.eye(3) * (1 + 0j), "np.linalg.eigvalsh (repeated eigenvalues)"),
    (lambda a: la.svdvals(a), np.outer(BZ, BZ), "np.linalg.svdvals (a zero singular value"),
    (lambda a: la.svd(a, compute_uv=False), np.eye(3) * 1j, "np.linalg.svd (repeated singular values)"),
    (lambda a: la.pinv(a), np.outer(BZ, BZ), "np.linalg.pinv (a rank-deficient"),
], ids=["eigh-values-repeated", "eigh-vectors-repeated", "svd", "svd-u-repeated", "qr-wide",
        "lstsq-rank-deficient", "slogdet-singular", "eigvalsh-repeated", "svdvals-rank-deficient", "svd-values-repeated", "pinv-rank-deficient"])
def test_refused_complex_calls_are_not_traceable(fn, a, call):
    with np.errstate(all="ignore"):
        t = trace(fn, {"a": a}, ["a"])
    assert not t.ok
    assert any(p.startswith(call) for p in t.problems), t.problems


def test_complex64_stays_single_precision():
    a = Z.astype(np.complex64)
    t = trace(lambda a: la.slogdet(a)[1] + np.sum(la.svdvals(a)) + np.real(la.det(a) + np.sum(la.inv(a))),
              {"a": a}, ["a"])
    assert t.ok and t.value.dtype == np.float32
    assert t.gradient()["a"].dtype == np.complex64 and t.jvp({"a": np.ones_like(a)}).dtype == np.float32
