"""numpy.linalg under tracing: every rule against central differences, refusals where no derivative exists."""
from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import check_against_numerics, check_transpose, numeric_jacobian

from gradcli.trace import Traced, kind_of, trace

rng = np.random.default_rng(7)
la = np.linalg


def _well(*shape):
    """A well-conditioned square matrix (or stack): distinct singular values, far from singular."""
    return rng.normal(size=shape) * 0.5 + 2 * np.eye(shape[-1]) + np.diag(np.arange(shape[-1]) * 0.7)


def _spd(*shape):
    b = rng.normal(size=shape)
    return b @ np.swapaxes(b, -1, -2) + shape[-1] * np.eye(shape[-1])


A, AB, S, SB = _well(3, 3), _well(2, 3, 3), _spd(3, 3), _spd(2, 3, 3)
TALL, WIDE, TALLB = rng.normal(size=(4, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4, 3))
VEC, MAT, ONE = rng.normal(size=3), rng.normal(size=(3, 2)), np.array([[1.7]])


def _signs(v, axis):
    """Columns (axis -1) or rows (-2) with their first entry positive: the same branch as the
    perturbed calls of the central differences take (np.sign is a constant: no derivative)."""
    first = v[..., :1, :] if axis == -1 else v[..., :, :1]
    return v * np.sign(first)


CASES = {
    # solve: b a vector or a matrix, stacked and broadcast, either operand traced
    "solve_vec": (lambda a, b: la.solve(a, b), dict(a=A, b=VEC), ["a", "b"]),
    "solve_mat": (lambda a, b: la.solve(a, b), dict(a=A, b=MAT), ["a", "b"]),
    "solve_batched_vec": (lambda a, b: la.solve(a, b), dict(a=AB, b=VEC), ["a", "b"]),
    "solve_batched_mat": (lambda a, b: la.solve(a, b), dict(a=AB, b=rng.normal(size=(2, 3, 2))), ["a", "b"]),
    "solve_broadcast_a": (lambda a, b: la.solve(a, b), dict(a=A, b=rng.normal(size=(2, 3, 2))), ["a", "b"]),
    "solve_a_only": (lambda a, b: la.solve(a, b), dict(a=AB, b=MAT), ["a"]),
    "solve_b_only": (lambda a, b: la.solve(a, b), dict(a=AB, b=MAT), ["b"]),
    "inv": (lambda a: la.inv(a), dict(a=A), ["a"]), "inv_batched": (lambda a: la.inv(a), dict(a=AB), ["a"]),
    "inv_1x1": (lambda a: la.inv(a), dict(a=ONE), ["a"]),
    "det": (lambda a: la.det(a), dict(a=A), ["a"]), "det_batched": (lambda a: la.det(a), dict(a=AB), ["a"]),
    "det_1x1": (lambda a: la.det(a), dict(a=ONE), ["a"]),
    "slogdet": (lambda a: la.slogdet(a), dict(a=-A), ["a"], 1),
    "slogdet_batched": (lambda a: la.slogdet(a).logabsdet, dict(a=AB), ["a"]),
    "matrix_power1": (lambda a: la.matrix_power(a, 1), dict(a=A), ["a"]),
    "matrix_power3": (lambda a: la.matrix_power(a, 3), dict(a=A * 0.5), ["a"]),
    "matrix_power6_batched": (lambda a: la.matrix_power(a, 6), dict(a=AB * 0.4), ["a"]),
    "matrix_power-1": (lambda a: la.matrix_power(a, -1), dict(a=A), ["a"]),
    "matrix_power-3": (lambda a: la.matrix_power(a, -3), dict(a=AB), ["a"]),
    "multi_dot": (lambda a, b: la.multi_dot([VEC, a, b, TALL]), dict(a=A, b=WIDE), ["a", "b"]),
    # factorizations
    "cholesky": (lambda a: la.cholesky(a), dict(a=S), ["a"]),
    "cholesky_batched": (lambda a: la.cholesky(a), dict(a=SB), ["a"]),
    "cholesky_upper": (lambda a: la.cholesky(a, upper=True), dict(a=SB), ["a"]),
    "cholesky_nonsymmetric": (lambda a: la.cholesky(a), dict(a=S + np.triu(np.ones((3, 3)), 1)), ["a"]),
    "cholesky_upper_nonsymmetric": (lambda a: la.cholesky(a, upper=True), dict(a=S + np.tril(np.ones((3, 3)), -1)),
                                    ["a"]),
    "qr_q": (lambda a: la.qr(a), dict(a=TALL), ["a"], 0), "qr_r": (lambda a: la.qr(a).R, dict(a=TALL), ["a"]),
    "qr_square": (lambda a: la.qr(a, mode="complete"), dict(a=A), ["a"], 0),
    "qr_batched_q": (lambda a: la.qr(a).Q, dict(a=TALLB), ["a"]),
    "qr_batched_r": (lambda a: la.qr(a)[1], dict(a=TALLB), ["a"]),
    "qr_mode_r": (lambda a: la.qr(a, mode="r"), dict(a=TALLB), ["a"]),
    "eigh_w": (lambda a: la.eigh(a), dict(a=S), ["a"], 0),
    "eigh_v": (lambda a: _signs(la.eigh(a).eigenvectors, -1), dict(a=S), ["a"]),
    "eigh_batched_v": (lambda a: _signs(la.eigh(a)[1], -1), dict(a=SB), ["a"]),
    "eigh_upper": (lambda a: _signs(la.eigh(a, UPLO="U")[1], -1) + la.eigh(a, "U")[0][..., None], dict(a=SB), ["a"]),
    "eigh_nonsymmetric": (lambda a: la.eigh(a)[0], dict(a=S + np.tril(np.ones((3, 3)), -1)), ["a"]),
    "eigvalsh": (lambda a: la.eigvalsh(a), dict(a=SB), ["a"]),
    "eigvalsh_upper": (lambda a: la.eigvalsh(a, UPLO="U"), dict(a=S + np.triu(np.ones((3, 3)), 1)), ["a"]),
    "eigh_1x1": (lambda a: la.eigh(a)[1] * la.eigh(a)[0], dict(a=ONE), ["a"]),
    "svd_s": (lambda a: la.svd(a, full_matrices=False), dict(a=TALL), ["a"], 1),
    "svd_u_tall": (lambda a: _signs(la.svd(a, full_matrices=False).U, -1), dict(a=TALL), ["a"]),
    "svd_vh_tall": (lambda a: _signs(la.svd(a, full_matrices=False)[0], -1)[0] @ la.svd(a, full_matrices=False).Vh,
                    dict(a=TALL), ["a"]),
    "svd_u_wide": (lambda a: _signs(la.svd(a, full_matrices=False)[0], -1), dict(a=WIDE), ["a"]),
    "svd_vh_wide": (lambda a: _signs(la.svd(a, full_matrices=False)[2], -2), dict(a=WIDE), ["a"]),
    "svd_square_full": (lambda a: _signs(la.svd(a)[2], -2), dict(a=A), ["a"]),
    "svd_batched": (lambda a: _signs(la.svd(a, full_matrices=False)[0], -1), dict(a=TALLB), ["a"]),
    "svd_batched_vh": (lambda a: _signs(la.svd(np.swapaxes(a, 1, 2), full_matrices=False)[2], -2),
                       dict(a=TALLB), ["a"]),
    "svd_values_only": (lambda a: la.svd(a, compute_uv=False), dict(a=TALLB), ["a"]),
    "svd_1x1": (lambda a: la.svd(a)[1], dict(a=-ONE), ["a"]),
    "svd_1xn": (lambda a: la.svd(a, full_matrices=False)[0] * la.svd(a, full_matrices=False)[2], dict(a=WIDE[:1]), ["a"]),
    "pinv_tall": (lambda a: la.pinv(a), dict(a=TALL), ["a"]), "pinv_wide": (lambda a: la.pinv(a), dict(a=WIDE), ["a"]),
    "pinv_batched": (lambda a: la.pinv(a, rtol=None), dict(a=TALLB), ["a"]),
    "lstsq_x": (lambda a, b: la.lstsq(a, b), dict(a=TALL, b=rng.normal(size=4)), ["a", "b"], 0),
    "lstsq_x_mat": (lambda a, b: la.lstsq(a, b, rcond=None)[0], dict(a=TALL, b=rng.normal(size=(4, 2))), ["a", "b"]),
    "lstsq_min_norm": (lambda a, b: la.lstsq(a, b)[0], dict(a=WIDE, b=VEC), ["a", "b"]),
    "lstsq_residuals": (lambda a, b: la.lstsq(a, b)[1], dict(a=TALL, b=rng.normal(size=(4, 2))), ["a", "b"]),
    "lstsq_s": (lambda a, b: la.lstsq(a, b)[3], dict(a=TALL, b=rng.normal(size=4)), ["a"]),
}
if hasattr(la, "svdvals"):  # numpy 2
    CASES["svdvals"] = (lambda a: la.svdvals(a), dict(a=WIDE), ["a"])


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_against_central_differences(case):
    fn, inputs, wrt, output = (case + (None,))[:4]
    check_against_numerics(fn, inputs, wrt, output)
    check_transpose(fn, inputs, wrt, output, seeds=[0])


V4 = np.array([0.7, -1.3, 0.4, 2.1])
X3 = rng.normal(size=(2, 3, 4))
NORMS = {
    **{f"vec_{o}": (lambda x, o=o: la.norm(x, o), V4) for o in (None, 2, 1, np.inf, -np.inf, 0, 3, 4, 0.5, -1, -2.5)},
    "vec_axis_keepdims": (lambda x: la.norm(x, 3, axis=1, keepdims=True), X3[0]),
    "vec_axis0_inf": (lambda x: la.norm(x, -np.inf, axis=0), X3),
    "scalar": (lambda x: la.norm(x), np.array(-1.5)),
    **{f"mat_{o}": (lambda x, o=o: la.norm(x, o), TALL) for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)},
    "mat_axes_swapped": (lambda x: la.norm(x, 1, axis=(1, 0)), TALL),
    **{f"batched_{o}": (lambda x, o=o: la.norm(x, o, axis=(2, 0), keepdims=True), X3)
       for o in ("nuc", 2, -2, np.inf, -1)},
    "wide_2": (lambda x: la.norm(x, -2, axis=(-2, -1)), X3),
}
if hasattr(la, "vector_norm"):  # numpy 2
    NORMS["vector_norm_all"] = (lambda x: la.vector_norm(x, ord=3), X3)
    NORMS["vector_norm_axes"] = (lambda x: la.vector_norm(x, axis=(0, 2), keepdims=True, ord=1), X3)
    NORMS["matrix_norm"] = (lambda x: la.matrix_norm(x, ord="nuc"), X3)
    NORMS["matrix_norm_fro"] = (lambda x: la.matrix_norm(x, keepdims=True), X3)


@pytest.mark.parametrize("fn, x", list(NORMS.values()), ids=list(NORMS))
def test_norms(fn, x):
    check_against_numerics(fn, {"x": x}, ["x"])
    check_transpose(fn, {"x": x}, ["x"], seeds=[0])


def test_norm_closed_forms():
    g = trace(lambda x: la.norm(x, "nuc"), {"x": TALL}, ["x"]).gradient()["x"]
    u, _, vt = la.svd(TALL, full_matrices=False)
    np.testing.assert_allclose(g, u @ vt, atol=1e-12)
    g = trace(lambda x: la.norm(x, 0), {"x": V4}, ["x"]).gradient()["x"]
    assert np.all(g == 0)
    g = trace(lambda x: la.norm(x, 1), {"x": np.array([[1.0, -2.0], [-3.0, 2.0]])}, ["x"]).gradient()["x"]
    np.testing.assert_allclose(g, [[0.5, -0.5], [-0.5, 0.5]])  # tied column sums share


def test_tuple_results_keep_numpy_types():
    def f(a):
        res = la.eigh(a)
        assert type(res) is type(la.eigh(S)) and res.eigenvalues is res[0] and isinstance(res[1], Traced)
        u, s, vh = svd = la.svd(a)
        assert type(svd) is type(la.svd(S)) and svd.S is s and isinstance(vh, Traced)
        sign, logdet = la.slogdet(a)
        assert not isinstance(sign, Traced) and isinstance(logdet, Traced)
        assert type(la.qr(a)) is type(la.qr(S)) and isinstance(la.qr(a).Q, Traced)
        x, resid, rank, sv = la.lstsq(a, VEC)
        assert isinstance(x, Traced) and resid.size == 0 and rank == 3 and isinstance(sv, Traced)
        return np.sum(res.eigenvectors ** 2) + logdet

    assert trace(f, {"a": S}, ["a"]).ok


def test_a_loss_of_several_calls():
    def loss(a, b, s):
        x = la.solve(a, b)
        w, v = la.eigh(s)
        return (np.sum(x ** 2) + la.slogdet(a)[1] + la.norm(la.cholesky(s), "nuc") + np.sum(w * v[0] ** 2)
                + la.det(la.inv(a) @ la.pinv(TALL[:3].T @ s @ TALL[:3] + a)) + np.sum(la.lstsq(a, b)[0]))

    inputs = dict(a=A, b=VEC, s=S)
    check_against_numerics(loss, inputs, ["a", "b", "s"])
    check_transpose(loss, inputs, ["a", "b", "s"])


def test_det_at_a_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]])
    g = trace(lambda a: la.det(a), {"a": a}, ["a"]).gradient()["a"]
    np.testing.assert_allclose(g.ravel(), numeric_jacobian(lambda a: la.det(a), {"a": a}, "a")[0], atol=1e-8)


def test_matrix_power_zero_is_a_constant():
    assert type(trace(lambda a: la.matrix_power(a, 0), {"a": A}, ["a"]).value) is np.ndarray
    t = trace(lambda a: np.sum(la.matrix_power(a, 0) * a), {"a": A}, ["a"])
    assert t.ok
    np.testing.assert_allclose(t.gradient()["a"], np.eye(3))


ORTHO = la.qr(rng.normal(size=(3, 3)))[0]
REPEATED = ORTHO @ np.diag([1.0, 1.0, 3.0]) @ ORTHO.T
SINGULAR = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 0.5]) + np.outer([0.0, 1.0, 1.0], [2.0, 0.0, 1.0])

REFUSED = {
    "eigh_repeated": (lambda a: la.eigh(a)[0], REPEATED, "np.linalg.eigh (repeated eigenvalues)"),
    "eigvalsh_repeated": (lambda a: la.eigvalsh(a), np.eye(3), "np.linalg.eigvalsh (repeated eigenvalues)"),
    "svd_repeated": (lambda a: la.svd(a)[1], ORTHO, "np.linalg.svd (repeated singular values)"),
    "svd_rank_deficient": (lambda a: la.svd(a)[1], SINGULAR, "np.linalg.svd (a zero singular value"),
    "svd_full_nonsquare": (lambda a: la.svd(a)[1], TALL, "np.linalg.svd (full_matrices=True on a non-square"),
    "svd_hermitian": (lambda a: la.svd(a, hermitian=True)[1], S, "np.linalg.svd (hermitian=True)"),
    "qr_wide": (lambda a: la.qr(a)[1], WIDE, "np.linalg.qr (more columns than rows)"),
    "qr_complete_tall": (lambda a: la.qr(a, "complete")[1], TALL, "np.linalg.qr (mode='complete' of a tall"),
    "qr_raw": (lambda a: la.qr(a, "raw")[1], TALL, "np.linalg.qr (mode='raw')"),
    "qr_rank_deficient": (lambda a: la.qr(a)[1], SINGULAR, "np.linalg.qr (a rank-deficient matrix)"),
    "slogdet_singular": (lambda a: la.slogdet(a)[1], SINGULAR, "np.linalg.slogdet (a singular matrix"),
    "pinv_rank_deficient": (lambda a: la.pinv(a), SINGULAR, "np.linalg.pinv (a rank-deficient"),
    "pinv_near_cutoff": (lambda a: la.pinv(a, rcond=0.9), np.diag([1.0, 0.5, 0.45]), "np.linalg.pinv (a rank-deficient"),
    "pinv_hermitian_singular": (lambda a: la.pinv(a, hermitian=True), REPEATED - np.eye(3),
                                "np.linalg.pinv (a rank-deficient"),
    "lstsq_rank_deficient": (lambda a: la.lstsq(a, VEC)[0], SINGULAR, "np.linalg.lstsq (a rank-deficient"),
    "norm2_repeated": (lambda a: la.norm(a, 2), ORTHO, "np.linalg.norm (ord=2 at a repeated singular value)"),
    "norm-2_singular": (lambda a: la.norm(a, -2), SINGULAR, "np.linalg.norm (ord=-2 at a zero singular value)"),
    "nuc_singular": (lambda a: la.norm(a, "nuc"), SINGULAR, "np.linalg.norm (ord='nuc' at a zero singular value)"),
    "norm2_zero": (lambda a: la.norm(a[:1], 2), np.zeros((2, 3)), "np.linalg.norm (ord=2 at a zero singular value)"),
    "norm1_complex": (lambda a: la.norm(a, 1), A + 1j * A, "np.linalg.norm (ord=1 of a complex matrix)"),
    "qr_complex_wide": (lambda a: la.qr(a[:2])[1], A + 1j * A, "np.linalg.qr (more columns than rows)"),
}


@pytest.mark.parametrize("fn, x, call", list(REFUSED.values()), ids=list(REFUSED))
def test_refused_where_no_derivative_exists(fn, x, call):
    t = trace(fn, {"a": x}, ["a"])
    assert not t.ok
    assert any(p.startswith(call) and "is not traceable" in p for p in t.problems), t.problems
    np.testing.assert_allclose(t.value, fn(x))  # computed on plain values all the same


def test_every_linalg_call_is_routed():
    calls = [la.solve, la.inv, la.det, la.slogdet, la.cholesky, la.qr, la.eigh, la.eigvalsh, la.svd, la.pinv,
             la.lstsq, la.matrix_power, la.norm, la.multi_dot]
    assert [f for f in calls if kind_of(f) != "differentiable"] == []


def test_float32_stays_float32():
    a = A.astype(np.float32)

    def f(a):
        w, v = la.eigh(a @ a.T)
        return (la.det(a) + la.slogdet(a)[1] + np.sum(la.solve(a, a[0]) * la.inv(a)[1]) + np.sum(la.qr(a)[1])
                + np.sum(v[0] * w) + la.norm(a, "nuc") + la.norm(a, 1) + la.norm(a[0], np.inf)
                + np.sum(la.cholesky(a @ a.T) * la.pinv(a)) + np.sum(la.svd(a)[1]))

    t = trace(f, {"a": a}, ["a"])
    assert t.ok and t.value.dtype == np.float32
    assert t.gradient()["a"].dtype == np.float32 and t.jvp({"a": np.ones_like(a)}).dtype == np.float32


@pytest.mark.parametrize("shape", [(200_000, 2), (2, 200_000), (3, 60_000, 3)], ids=str)
def test_pinv_of_a_tall_or_wide_matrix_stays_in_its_own_size(shape):
    """The pinv rule's projections I - A P (m x m) and I - P A (n x n) are never formed: the sweeps'
    memory is a few copies of A, not 3.2e11 bytes; their values agree with directional differences."""
    import tracemalloc

    r = np.random.default_rng(11)
    a, u = r.normal(size=shape), r.normal(size=shape)
    t = trace(lambda a: la.pinv(a), {"a": a}, ["a"])
    g = r.normal(size=t.value.shape)
    tracemalloc.start()
    try:
        back, fwd = t.vjp(g)["a"], t.jvp({"a": u})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * a.nbytes, peak
    assert back.shape == a.shape and fwd.shape == t.value.shape
    h = 1e-6
    fd = (la.pinv(a + h * u) - la.pinv(a - h * u)) / (2 * h)
    np.testing.assert_allclose(fwd, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(fd)))
    assert abs(np.sum(back * u) - np.sum(fd * g)) <= 1e-6 * np.sum(np.abs(fd * g))
