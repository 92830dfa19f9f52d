"""Linear algebra: the gradient tests of HIPS autograd's test_linalg as autodiff-only checks, with this
file's own matrices. Each input is made well posed inside the function (diagonally dominant for
inverses and solves, ``a aᵀ + n I`` where a positive definite matrix is needed, eigenvalues at least
2 apart where eigenvectors are used), so the derivative exists at every drawn point. Functions of
eigenvectors and singular vectors are written to be invariant to their signs, as a loss would be;
a few take the vectors as numpy returns them (LAPACK's choice of sign is locally constant)."""
import numpy as np
import scipy.linalg

import gradcli
from suite_helpers import eye_like, named, separated, spd, sym


def case(name, fn, **spec):
    gradcli.check(**spec)(named(fn, name))


def dominant(a, k=5.0):
    return a + k * eye_like(a)


# --- inverse, solve, determinants ------------------------------------------------------------------
case("inv_2d", lambda x: np.linalg.inv(dominant(x)), x=(4, 4), order=2)
for label, shape in (("3d", (3, 3, 3)), ("4d", (2, 2, 3, 3))):
    case(f"inv_{label}", lambda x: np.linalg.inv(dominant(x)), x=shape)
case("inv_of_product", lambda x: np.linalg.inv(x @ x + 1.0 * np.eye(4)), x=(4, 4))
case("inv_sum", lambda x: np.sum(np.linalg.inv(dominant(x)) ** 2), x=(4, 4))
B46 = np.linspace(-1.0, 1.0, 4 * 3).reshape(4, 3)
B4 = np.array([0.3, -1.2, 0.8, 2.0])
case("solve_arg1", lambda a: np.linalg.solve(dominant(a, 10.0), B46), a=(4, 4), order=2)
case("solve_arg1_1d", lambda a: np.linalg.solve(dominant(a, 10.0), B4), a=(4, 4), order=2)
case("solve_arg2", lambda b: np.linalg.solve(np.eye(4) + np.outer(B4, B4) / 10.0, b), b=(4, 3), order=2)
case("solve_both", lambda a, b: np.linalg.solve(dominant(a), b), a=(4, 4), b=(4, 2))
B341 = np.arange(12.0).reshape(3, 4, 1) / 6.0
case("solve_arg1_3d", lambda a: np.linalg.solve(dominant(a), B341), a=(3, 4, 4), order=2)
case("solve_arg1_3d_3d", lambda a, b: np.linalg.solve(dominant(a), b), a=(3, 4, 4), b=(3, 4, 5), order=2)
case("solve_batched_vector", lambda a, b: np.linalg.solve(dominant(a), b[..., None])[..., 0], a=(2, 3, 3),
     b=(2, 3))
case("det", lambda x: np.linalg.det(x), x=(4, 4), order=2)
case("det_3d", lambda x: np.linalg.det(x), x=(3, 3, 3), order=2)
case("det_1x1", lambda x: np.linalg.det(x), x=(1, 1))
case("slogdet", lambda x: np.linalg.slogdet(x)[1], x=(4, 4), order=2)
case("slogdet_negated", lambda x: np.linalg.slogdet(-x)[1], x=(4, 4))
case("slogdet_namedtuple", lambda x: np.linalg.slogdet(x).logabsdet * np.linalg.slogdet(x).sign, x=(4, 4))
case("slogdet_3d", lambda x: np.sum(np.linalg.slogdet(spd(x))[1]), x=(3, 4, 4), order=2)
case("logdet_via_cholesky", lambda x: 2.0 * np.sum(np.log(np.diagonal(np.linalg.cholesky(spd(x))))), x=(4, 4))
case("matrix_power_3", lambda x: np.linalg.matrix_power(x, 3), x=(3, 3))
case("matrix_power_0", lambda x: np.linalg.matrix_power(x, 0) + x, x=(3, 3))
case("matrix_power_negative", lambda x: np.linalg.matrix_power(dominant(x), -2), x=(3, 3))
case("multi_dot", lambda a, b, c: np.linalg.multi_dot([a, b, c]), a=(2, 3), b=(3, 4), c=(4, 2))
case("multi_dot_vectors", lambda a, b, c: np.linalg.multi_dot([a, b, c]), a=(3,), b=(3, 4), c=(4,))


# --- norms ------------------------------------------------------------------------------------------
case("vector_2norm", lambda x: np.linalg.norm(x), x=(6,), order=2)
case("frobenius_norm", lambda x: np.linalg.norm(x), x=(5, 4), order=2)
case("frobenius_norm_axis", lambda x: np.linalg.norm(x, axis=(0, 1)), x=(4, 3, 2), order=2)
for p in (1, 2, 3, 4, 0.5, -1, np.inf, -np.inf):
    label = {np.inf: "inf", -np.inf: "minus_inf"}.get(p, str(p).replace("-", "minus_").replace(".", "_"))
    case(f"vector_norm_ord_{label}", lambda x, p=p: np.linalg.norm(x, ord=p), x=(6,), order=2)
case("vector_norm_ord_0", lambda x: np.linalg.norm(x, ord=0) + np.sum(x), x=(6,))
for axis in range(3):
    case(f"norm_axis{axis}", lambda x, axis=axis: np.linalg.norm(x, axis=axis), x=(4, 3, 2))
case("norm_axis_keepdims", lambda x: np.linalg.norm(x, ord=3, axis=1, keepdims=True), x=(3, 4))
for ord_ in ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
    label = {np.inf: "inf", -np.inf: "minus_inf"}.get(ord_, str(ord_).replace("-", "minus_"))
    case(f"matrix_norm_{label}", lambda x, o=ord_: np.linalg.norm(x, ord=o), x=(4, 3), order=2)
case("norm_nuclear_axis", lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)), x=(4, 3, 2), order=2)
case("norm_spectral_axis", lambda x: np.linalg.norm(x, ord=2, axis=(2, 0)), x=(4, 3, 2))
case("vector_norm_function", lambda x: np.linalg.vector_norm(x, ord=3, axis=0), x=(4, 3))
case("matrix_norm_function", lambda x: np.linalg.matrix_norm(x, ord="nuc"), x=(2, 4, 3))


# --- symmetric eigenproblems -----------------------------------------------------------------------
def eig_loss(w, v):
    # sign-free in the eigenvectors: weights on the squared entries of each
    return np.sum(w * np.arange(1.0, w.shape[-1] + 1)) + np.sum(v ** 2 * np.linspace(0.5, 2.0, v.shape[-1]))


case("eigh_lower", lambda x: eig_loss(*np.linalg.eigh(separated(x))), x=(4, 4), order=2)
case("eigh_upper", lambda x: eig_loss(*np.linalg.eigh(separated(x), "U")), x=(4, 4), order=2)
case("eigh_broadcasting", lambda x: eig_loss(*np.linalg.eigh(separated(x))), x=(2, 2, 3, 3), order=2)
case("eigh_upper_broadcasting", lambda x: eig_loss(*np.linalg.eigh(separated(x), UPLO="U")), x=(2, 2, 3, 3))
case("eigh_values", lambda x: np.linalg.eigh(spd(x))[0], x=(4, 4))
case("eigh_vectors_as_returned", lambda x: np.linalg.eigh(separated(x))[1], x=(3, 3))
case("eigh_projector", lambda x: (lambda v: v[:, :2] @ v[:, :2].T)(np.linalg.eigh(separated(x))[1]), x=(4, 4))
case("eigh_namedtuple", lambda x: np.sum(np.linalg.eigh(separated(x)).eigenvectors[:, 0] ** 4), x=(4, 4))
case("eigvalsh", lambda x: np.linalg.eigvalsh(sym(x)), x=(4, 4), order=2)
case("eigvalsh_upper_batched", lambda x: np.linalg.eigvalsh(spd(x), UPLO="U"), x=(2, 3, 3))
case("eigh_reconstruct", lambda x: (lambda w, v: v @ np.diag(np.exp(w)) @ v.T)(*np.linalg.eigh(separated(x))),
     x=(3, 3))


# --- Cholesky and QR -------------------------------------------------------------------------------
case("cholesky", lambda x: np.linalg.cholesky(spd(x)), x=(4, 4), order=2)
case("cholesky_broadcast", lambda x: np.linalg.cholesky(spd(x)), x=(3, 4, 4), order=2)
case("cholesky_upper", lambda x: np.linalg.cholesky(spd(x), upper=True), x=(3, 3))
Z4 = np.array([0.5, -1.0, 0.25, 2.0])
case("cholesky_reparameterization_trick", lambda x: np.linalg.norm(np.dot(np.linalg.cholesky(spd(x)), Z4)), x=(4, 4))
case("cholesky_of_sym_input", lambda x: np.linalg.cholesky(sym(x) + 4.0 * np.eye(3)), x=(3, 3))
case("qr_tall", lambda x: (lambda q, r: np.sum(q * np.sign(np.diag(r))) + np.sum(r ** 2))(*np.linalg.qr(x)), x=(5, 3))
case("qr_r_squared", lambda x: np.linalg.qr(x)[1] ** 2, x=(4, 4), order=2)
case("qr_q_as_returned", lambda x: np.linalg.qr(x)[0], x=(4, 3))
case("qr_r_mode", lambda x: np.linalg.qr(x, mode="r") ** 2, x=(3, 3))
case("qr_batched", lambda x: np.linalg.qr(x).R, x=(2, 4, 3))


# --- singular values and vectors ------------------------------------------------------------------
def svd_loss(u, s, vt):
    # sign-free in the singular vectors: u diag(s) vt and the squared entries of u and vt
    return np.sum((u * s[..., None, :]) @ vt) + np.sum(u ** 2 * np.linspace(0.5, 2.0, u.shape[-1])) \
        + np.sum(vt ** 2 * np.linspace(0.5, 2.0, vt.shape[-1])) + np.sum(s ** 2)


for label, shape in (("wide_2d", (3, 5)), ("wide_3d", (4, 3, 5)), ("square_2d", (4, 4)), ("square_3d", (3, 4, 4)),
                     ("tall_2d", (5, 3)), ("tall_3d", (4, 5, 3))):
    case(f"svd_{label}", lambda x: svd_loss(*np.linalg.svd(x, full_matrices=False)), x=shape, order=2)
case("svd_only_s_2d", lambda x: np.linalg.svd(x, full_matrices=False, compute_uv=False), x=(5, 3), order=2)
case("svd_only_s_3d", lambda x: np.linalg.svd(x, compute_uv=False), x=(4, 5, 3), order=2)
case("svd_u_as_returned", lambda x: np.linalg.svd(x, full_matrices=False)[0], x=(4, 3))
case("svd_namedtuple_vh", lambda x: np.sum(np.linalg.svd(x).Vh[0] ** 4), x=(3, 3))
case("svdvals", lambda x: np.linalg.svdvals(x), x=(3, 4))
case("pinv_tall", lambda x: np.linalg.pinv(x), x=(4, 3), order=2)
case("pinv_wide", lambda x: np.linalg.pinv(x), x=(2, 4))
case("pinv_batched", lambda x: np.linalg.pinv(x), x=(2, 3, 2))
case("lstsq_solution", lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], a=(5, 3), b=(5,))
case("lstsq_residual", lambda a, b: np.linalg.lstsq(a, b, rcond=None)[1], a=(5, 3), b=(5, 2))
# a complex matrix from real inputs: autograd's linalg takes complex matrices too
case("complex_inv", lambda a, b: np.abs(np.linalg.inv(a + 1j * b + 4.0 * np.eye(3))), a=(3, 3), b=(3, 3))


# --- scipy.linalg ----------------------------------------------------------------------------------
case("scipy_sqrtm", lambda x: np.sum(scipy.linalg.sqrtm(spd(x))), x=(2, 2))
for trans in ("N", "T"):
    for lower in (True, False):
        case(f"scipy_solve_triangular_{trans}_{'lower' if lower else 'upper'}",
             lambda a, b, t=trans, lo=lower: scipy.linalg.solve_triangular(dominant(a, 10.0), b, trans=t, lower=lo),
             a=(4, 4), b=(4, 2))
