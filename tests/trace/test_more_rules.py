"""Traced rules for the calls the tracer used to cut at: scipy.special's parameter derivatives (hyp2f1
in a, b, c; hyp1f1 in a, b; the incomplete gammas in a) and more of numpy's linear algebra. Each rule
against mpmath's central differences at 80 digits (mp_helpers) or a closed form, at ordinary and edge
points, and through a check, whose reference must then be the traced AD."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from mp_helpers import mp_derivative
from test_trace_complex import check_complex, check_transpose_re
from trace_helpers import check_against_numerics, check_transpose

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.trace import trace

sc = pytest.importorskip("scipy.special")


def traced_partial(f, args: dict, name):
    """d f / d args[name] elementwise, from the traced jvp (a unit tangent in that input alone)."""
    t = trace(f, args, [name])
    assert t.ok, t.problems
    np.testing.assert_allclose(t.value, f(**args), rtol=1e-15, atol=0)
    check_transpose(f, args, [name])
    return t.jvp({name: np.ones_like(args[name])})


def mp_partial(g, args: dict, name):
    """The same partial of the mpmath function ``g(*args.values())`` by differences at 80 digits."""
    flat = dict(zip(args, np.broadcast_arrays(*[np.asarray(v, float) for v in args.values()])))

    def at(k, v):
        return g(*[v if n == name else mpmath.mpf(a.flat[k]) for n, a in flat.items()])

    out = [mp_derivative(lambda v, k=k: at(k, v), flat[name].flat[k])[()] for k in range(flat[name].size)]
    return np.array(out).reshape(flat[name].shape)


def assert_partial(f, g, args, name, rtol=1e-10):
    got = traced_partial(f, args, name)
    want = mp_partial(g, args, name)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-6 * np.max(np.abs(want)), err_msg=name)


def grid(*axes):
    return [a.ravel() for a in np.meshgrid(*[np.asarray(x, float) for x in axes])]


def checked_by_traced_ad(fn, grad, **inputs):
    """A check of ``fn`` with a correct hand-written gradient: it must pass against the traced AD."""
    r = run_check(build_spec(fn, grad=grad, **inputs), {})
    assert r.status == "pass", r.message
    assert r.reference == "traced_reverse", (r.reference, r.notes)
    return r


def fd_grad(f, x, h=1e-6):
    """The gradient of the real scalar ``f`` by central differences, dL/dRe + i dL/dIm for a complex x
    (PyTorch's convention): a hand-written gradient accurate to about 1e-9."""
    x = np.asarray(x)
    out = np.zeros(x.shape, x.dtype)
    for k in range(x.size):
        for d in (1.0, 1j) if np.iscomplexobj(x) else (1.0,):
            up, down = x.copy(), x.copy()
            up.flat[k] += h * d
            down.flat[k] -= h * d
            out.flat[k] += d * (f(up) - f(down)) / (2 * h)
    return out


# --- scipy.special: parameters with no closed-form derivative ------------------------------------------
HYP2F1 = [(1.5, 0.5, 2.0), (-2.0, 3.5, 1.25), (0.3, -0.7, 3.3), (2.5, 1.5, 0.5)]


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_hyp2f1_in_its_parameters(name):
    z = np.array([-20.0, -0.9, 0.0, 0.3, 0.75, 0.97])
    for a, b, c in HYP2F1:  # a = -2: a polynomial in z, still analytic in a
        args = {"a": np.full(z.shape, a), "b": np.full(z.shape, b), "c": np.full(z.shape, c), "z": z}
        assert_partial(lambda a, b, c, z: sc.hyp2f1(a, b, c, z), mpmath.hyp2f1, args, name, 1e-9)


@pytest.mark.parametrize("name", ["a", "b"])
def test_hyp1f1_in_its_parameters(name):
    x = np.array([-30.0, -5.0, -0.5, 0.0, 0.8, 4.0, 25.0])
    for a, b in [(1.5, 2.5), (-2.0, 0.75), (0.2, 3.0), (3.0, 0.4)]:
        args = {"a": np.full(x.shape, a), "b": np.full(x.shape, b), "x": x}
        assert_partial(lambda a, b, x: sc.hyp1f1(a, b, x), mpmath.hyp1f1, args, name, 1e-9)


def _p(a, x):
    return mpmath.gammainc(a, 0, x, regularized=True)


def _q(a, x):
    return mpmath.gammainc(a, x, mpmath.inf, regularized=True)


@pytest.mark.parametrize("ufunc, mp", [(sc.gammainc, _p), (sc.gammaincc, _q)], ids=["gammainc", "gammaincc"])
def test_incomplete_gamma_in_a(ufunc, mp):
    # x = 60 at a = 2: P is 1 to 24 digits, its a-derivative ~1e-24, kept through Q
    a, x = grid([0.05, 0.9, 1.0, 2.0, 10.0], [1e-3, 0.5, 3.0, 12.0, 60.0])
    assert_partial(lambda a, x: ufunc(a, x), mp, {"a": a, "x": x}, "a")
    assert_partial(lambda a, x: ufunc(a, x), mp, {"a": a, "x": x}, "x")


def test_incomplete_gamma_in_a_closed_form_at_x_zero_and_a_one():
    # Q(a, 0) = 1 for every a; at a = 1, Q = Gamma(a, x) / Gamma(a) has d/da = Gamma_a(1, x) + euler e^-x,
    # with Gamma_a(1, x) = int_x^inf log(t) e^-t dt = E1(x) + log(x) e^-x
    x = np.array([0.0, 0.25, 2.0, 9.0])
    t = trace(lambda a: sc.gammaincc(a, x), {"a": np.ones(4)}, ["a"])
    want = [0.0] + [float(mpmath.e1(v) + mpmath.log(v) * mpmath.exp(-v) + mpmath.euler * mpmath.exp(-v))
                    for v in x[1:]]
    np.testing.assert_allclose(t.jvp({"a": np.ones(4)}), want, rtol=1e-13)


def test_parameter_rules_through_a_check():
    z = np.array([-0.5, 0.2, 0.6])
    checked_by_traced_ad(lambda a: np.sum(sc.hyp2f1(a, 0.5, 2.0, z) ** 2),
                         lambda a: 2 * sc.hyp2f1(a, 0.5, 2.0, z) * np.array(
                             [mp_derivative(lambda t, zz=zz: mpmath.hyp2f1(t, 0.5, 2.0, zz), a[k])[()]
                              for k, zz in enumerate(z)]), a=np.array([1.5, -0.3, 2.2]))
    checked_by_traced_ad(lambda b: np.sum(sc.hyp1f1(1.2, b, 3 * z)),
                         lambda b: np.array([mp_derivative(lambda t, zz=zz: mpmath.hyp1f1(1.2, t, 3 * zz), b[k])[()]
                                             for k, zz in enumerate(z)]), b=np.array([0.7, 2.0, 4.5]))
    checked_by_traced_ad(lambda a: np.sum(sc.gammainc(a, 2.0)),
                         lambda a: mp_derivative(lambda t: _p(t, 2.0), a), a=np.array([0.5, 1.5, 6.0]))


# --- numpy.linalg ----------------------------------------------------------------------------------------
la = np.linalg
rng = np.random.default_rng(26)


def _c(*shape):
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def _svd_invariants(a):
    """Functions of U and V^H that the common phase of a singular pair does not change."""
    u, s, vt = la.svd(a, full_matrices=False)
    return np.concatenate([np.ravel((u * s[..., None, :]) @ vt), np.ravel(np.abs(u) ** 2),
                           np.ravel(np.abs(vt) ** 3), np.ravel(u @ vt), np.ravel(u[..., :, :1] * vt[..., :1, :])])


@pytest.mark.parametrize("a", [_c(3, 3), _c(4, 3), _c(2, 4), _c(2, 3, 3), rng.normal(size=(3, 2))],
                         ids=["square", "tall", "wide", "stacked", "real"])
def test_complex_svd_vectors_against_differences(a):
    check_complex(_svd_invariants, {"a": a}, ["a"])
    check_transpose_re(_svd_invariants, {"a": a}, ["a"])


def test_complex_svd_tangent_closed_forms():
    a, da = _c(4, 3), _c(4, 3)
    t = trace(lambda a: la.svd(a, full_matrices=False), {"a": a}, ["a"])
    u, s, vt = la.svd(a, full_matrices=False)
    du = t.jvp({"a": da})
    dv = trace(lambda a: la.svd(a, full_matrices=False)[2], {"a": a}, ["a"]).jvp({"a": da}).conj().T
    ds = trace(lambda a: la.svd(a, full_matrices=False)[1], {"a": a}, ["a"]).jvp({"a": da})
    # dA = dU S V^H + U dS V^H + U S dV^H, U^H dU anti-Hermitian, and the gauge: Re and Im of diag(V^H dV) = 0
    np.testing.assert_allclose((du * s) @ vt + (u * ds) @ vt + (u * s) @ dv.conj().T, da, atol=1e-12)
    w = u.conj().T @ du
    np.testing.assert_allclose(w + w.conj().T, 0, atol=1e-12)
    np.testing.assert_allclose(np.diagonal(vt @ dv), 0, atol=1e-12)


def test_complex_svd_through_a_check():
    w = rng.normal(size=(4, 3))

    def f(a):
        u, s, vt = la.svd(a, full_matrices=False)
        return np.sum(w * np.abs(u) ** 2) + np.sum(s) + np.real(np.sum(u @ vt))

    a = _c(4, 3)
    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=a)


def _real_eig_distinct(n, complex_pairs):
    """A real matrix with distinct eigenvalues, complex conjugate pairs among them when asked."""
    while True:
        a = rng.normal(size=(n, n))
        w = la.eigvals(a)
        if np.iscomplexobj(w) == complex_pairs and np.min(np.abs(w[:, None] - w) + np.eye(n) * 9) > 0.3:
            return a


@pytest.mark.parametrize("a", [_real_eig_distinct(4, False), _real_eig_distinct(4, True), _c(3, 3), _c(2, 3, 3)],
                         ids=["real-real-eigenvalues", "real-complex-pairs", "complex", "stacked"])
def test_eigvals_of_a_general_matrix(a):
    check_complex(lambda a: la.eigvals(a), {"a": a}, ["a"])
    check_transpose_re(lambda a: la.eigvals(a), {"a": a}, ["a"])


def test_eigvals_closed_form_and_refusals():
    # a triangular matrix's eigenvalues are its diagonal: dw = diag(dA)'s, whatever dA's other entries
    a = np.triu(_c(3, 3)) + np.diag([0.0, 2.0, 5.0])
    da = _c(3, 3)
    got = trace(lambda a: la.eigvals(a), {"a": a}, ["a"]).jvp({"a": np.triu(da)})
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(np.diag(da)), atol=1e-12)
    for bad, why in [(np.eye(3), "repeated eigenvalues"), (np.array([[1.0, 1.0], [1e-30, 1.0]]), "repeated")]:
        t = trace(lambda a: la.eigvals(a), {"a": bad}, ["a"])
        assert not t.ok and why in t.problems[0]


def test_eigvals_through_a_check():
    a = _real_eig_distinct(3, True)

    def f(a):
        return np.sum(np.abs(la.eigvals(a)) ** 2 + np.real(la.eigvals(a)) ** 3)

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=a)


@pytest.mark.parametrize("a", [_c(3, 3), rng.normal(size=(3, 3)), _c(2, 3, 3)], ids=["complex", "real", "stacked"])
def test_pinv_hermitian_reads_the_lower_triangle(a):
    # not Hermitian on purpose: numpy's eigh reads the lower triangle, and so must the derivative
    a = a + 4 * np.eye(3)
    check_complex(lambda a: la.pinv(a, hermitian=True), {"a": a}, ["a"])
    check_transpose_re(lambda a: la.pinv(a, hermitian=True), {"a": a}, ["a"])


def test_pinv_hermitian_closed_form_and_a_check():
    s = rng.normal(size=(3, 3))
    s = s @ s.T + np.eye(3)
    ds = rng.normal(size=(3, 3))
    ds = ds + ds.T
    p = la.inv(s)
    got = trace(lambda a: la.pinv(a, hermitian=True), {"a": s}, ["a"]).jvp({"a": ds})
    np.testing.assert_allclose(got, -p @ ds @ p, rtol=1e-12, atol=1e-14)
    t = trace(lambda a: la.pinv(a, hermitian=True), {"a": np.diag([1.0, 1.0, 0.0])}, ["a"])
    assert not t.ok and "rank-deficient" in t.problems[0]

    def f(a):
        return np.sum(la.pinv(a, hermitian=True) ** 2)

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=s)


# --- np.interp in its sample positions --------------------------------------------------------------------
XP = np.array([-1.0, 0.0, 0.5, 2.0])
FP = np.array([1.0, -2.0, 0.5, 3.0])
XI = np.array([-1.7, -0.3, 0.2, 0.9, 1.9, 2.4])  # both sides outside, every segment


@pytest.mark.parametrize("kw", [{}, {"left": -5.0, "right": 7.0}, {"period": 3.5}])
def test_interp_in_xp(kw):
    check_against_numerics(lambda x, xp, fp: np.interp(x, xp, fp, **kw), {"x": XI, "xp": XP, "fp": FP},
                           ["x", "xp", "fp"])
    check_transpose(lambda x, xp: np.interp(x, xp, FP, **kw), {"x": XI, "xp": XP}, ["x", "xp"])


def test_interp_in_left_and_right():
    check_against_numerics(lambda xp, left, right: np.interp(XI, xp, FP, left, right),
                           {"xp": XP, "left": np.array(-5.0), "right": np.array(7.0)}, ["xp", "left", "right"])


def test_interp_in_xp_closed_form():
    # inside [xp_j, xp_j+1]: y = f_j + (x - xp_j) s, s = (f_j+1 - f_j) / (xp_j+1 - xp_j);
    # dy/dxp_j = s (x - xp_j+1) / w, dy/dxp_j+1 = -s (x - xp_j) / w; outside, y is constant
    t = trace(lambda xp: np.interp(XI, xp, FP), {"xp": XP}, ["xp"])
    jac = np.array([t.jvp({"xp": e}) for e in np.eye(4)]).T
    want = np.zeros((6, 4))
    for i, x in enumerate(XI):
        j = np.searchsorted(XP, x, side="right") - 1
        if 0 <= j < 3:
            w, s = XP[j + 1] - XP[j], (FP[j + 1] - FP[j]) / (XP[j + 1] - XP[j])
            want[i, j], want[i, j + 1] = s * (x - XP[j + 1]) / w, -s * (x - XP[j]) / w
    np.testing.assert_allclose(jac, want, rtol=1e-14, atol=1e-15)


def test_interp_in_xp_through_a_check():
    def f(xp):
        return np.sum(np.interp(XI, xp, FP) ** 2)

    checked_by_traced_ad(f, lambda xp: fd_grad(f, xp), xp=XP)


# --- scipy.linalg's general-matrix functions ---------------------------------------------------------------
sl = pytest.importorskip("scipy.linalg")
G = rng.normal(size=(3, 3)) + 3 * np.eye(3)
SPD = G @ G.T + np.eye(3)
NOT_SYM = SPD + np.triu(rng.normal(size=(3, 3)), 1)  # the lower triangle is SPD's: what lower=True reads
B2 = rng.normal(size=(3, 2))
T4 = rng.normal(size=(4, 3))


@pytest.mark.parametrize("fn, inputs", [
    (lambda a, b: sl.solve(a, b), {"a": G, "b": B2}),
    (lambda a, b: sl.solve(a, b[:, 0], transposed=True), {"a": G, "b": B2}),
    (lambda a, b: sl.solve(a, b, assume_a="pos", lower=True), {"a": NOT_SYM, "b": B2}),
    (lambda a, b: sl.solve(a, b, assume_a="sym"), {"a": NOT_SYM.T, "b": B2}),
    (lambda a: sl.inv(a), {"a": G}), (lambda a: sl.det(a), {"a": G}), (lambda a: sl.pinv(a), {"a": G[:, :2]}),
], ids=["solve", "solve-transposed", "solve-pos-lower", "solve-sym-upper", "inv", "det", "pinv"])
def test_scipy_linalg_general_functions(fn, inputs):
    check_against_numerics(fn, inputs, list(inputs))
    check_transpose(fn, inputs, list(inputs))


@pytest.mark.parametrize("a", [_c(3, 3), _real_eig_distinct(3, True)], ids=["complex", "real"])
def test_scipy_linalg_complex_and_eigvals(a):
    h = a @ a.conj().T + np.eye(3)
    check_complex(lambda a: sl.eigvals(a), {"a": a}, ["a"])
    check_complex(lambda a: sl.solve(a, np.ones(3), assume_a="her"), {"a": np.tril(h) + np.triu(a, 1)}, ["a"])
    check_complex(lambda a: sl.inv(a), {"a": a}, ["a"])


def test_scipy_linalg_through_a_check_and_refusals():
    def f(a):
        return np.sum(sl.solve(a, B2, assume_a="pos") ** 2) + sl.det(a)

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=SPD)
    t = trace(lambda a: sl.pinv(a, atol=0.1), {"a": G}, ["a"])
    assert not t.ok and "atol=" in t.problems[0]
    t = trace(lambda a: sl.solve(a, B2, assume_a="banded"), {"a": G}, ["a"])
    assert not t.ok and "assume_a='banded'" in t.problems[0]


def _sl_svd_invariants(a):
    u, s, vt = sl.svd(a, full_matrices=False)
    return np.concatenate([np.ravel((u * s) @ vt), np.ravel(np.abs(u) ** 2), np.ravel(u @ vt),
                           sl.svd(a, compute_uv=False)])


@pytest.mark.parametrize("a", [_c(3, 3), _c(4, 3), rng.normal(size=(3, 4))], ids=["complex", "tall", "real-wide"])
def test_scipy_linalg_svd(a):
    t = trace(lambda a: sl.svd(a, full_matrices=False), {"a": a}, ["a"], output=0)
    np.testing.assert_array_equal(t.value, sl.svd(a, full_matrices=False)[0])  # scipy's own vectors
    check_complex(_sl_svd_invariants, {"a": a}, ["a"])
    check_transpose_re(_sl_svd_invariants, {"a": a}, ["a"])


@pytest.mark.parametrize("lower", [False, True])
def test_scipy_cho_factor_and_cho_solve(lower):
    a = NOT_SYM if lower else NOT_SYM.T  # the triangle scipy reads is SPD's; the other is not its mirror
    t = trace(lambda a: sl.cho_factor(a, lower=lower), {"a": a}, ["a"])
    np.testing.assert_array_equal(t.value, sl.cho_factor(a, lower=lower)[0])
    check_against_numerics(lambda a: sl.cho_factor(a, lower=lower)[0], {"a": a}, ["a"])
    check_against_numerics(lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=lower), b), {"a": a, "b": B2},
                           ["a", "b"])
    check_transpose(lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=lower), b[:, 0]), {"a": a, "b": B2},
                    ["a", "b"])


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_scipy_lu_factor_and_lu_solve(trans):
    a = _c(4, 4) if trans == 2 else rng.normal(size=(4, 4))
    b = rng.normal(size=(4, 2))
    t = trace(lambda a: sl.lu_factor(a), {"a": a}, ["a"])
    np.testing.assert_array_equal(t.value, sl.lu_factor(a)[0])
    fn = (check_complex if trans == 2 else check_against_numerics)
    fn(lambda a: sl.lu_factor(a)[0], {"a": a}, ["a"])
    fn(lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=trans), {"a": a, "b": b}, ["a", "b"])
    # closed form: x = A^-1 b (A^-T, A^-H b for trans 1, 2), dx = -A^-1 dA x
    da = rng.normal(size=(4, 4))
    op = [lambda m: m, np.transpose, lambda m: m.conj().T][trans]
    x = np.linalg.solve(op(a), b)
    got = trace(lambda a: sl.lu_solve(sl.lu_factor(a), b, trans=trans), {"a": a}, ["a"]).jvp({"a": da})
    np.testing.assert_allclose(got, -np.linalg.solve(op(a), op(da) @ x), rtol=1e-10, atol=1e-12)


def test_scipy_factorizations_through_a_check():
    def f(a):
        return np.sum(sl.lu_solve(sl.lu_factor(a), B2) ** 2) + np.sum(sl.cho_solve(sl.cho_factor(a @ a.T), B2))

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=G)


def _eig_invariants(a):
    """Functions of eig's vectors that their phases do not change (and, for real vectors, the vectors)."""
    w, v = la.eig(a)
    return np.concatenate([np.ravel(w), np.ravel((v * w[..., None, :]) @ la.inv(v)), np.ravel(np.abs(v) ** 2)])


@pytest.mark.parametrize("a", [_c(3, 3), _real_eig_distinct(3, True), _c(2, 3, 3)],
                         ids=["complex", "real-complex-pairs", "stacked"])
def test_eig_against_differences(a):
    check_complex(_eig_invariants, {"a": a}, ["a"])
    check_transpose_re(_eig_invariants, {"a": a}, ["a"])


def test_eig_real_vectors_and_a_check():
    a = _real_eig_distinct(4, False)  # real vectors of norm 1: only their sign is free, and it does not move
    check_against_numerics(lambda a: la.eig(a).eigenvectors, {"a": a}, ["a"])
    check_transpose(lambda a: la.eig(a).eigenvectors, {"a": a}, ["a"])

    def f(a):
        w, v = la.eig(a)
        return np.sum(w * np.sum(v ** 2, axis=0)) + np.sum(v[0] ** 2)

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=a)


def test_complex_lu_ties_in_lapacks_measure():
    # LAPACK pivots on |Re| + |Im|: 1.9 / (1 + 1j) has modulus 1.34 but is no tie (1.9 < 2)
    a = np.array([[1 + 1j, 0.5], [1.9, 1.0]])
    assert abs(sl.lu(a)[1][1, 0]) > 1
    check_complex(lambda a: sl.lu(a)[2], {"a": a}, ["a"])
    t = trace(lambda a: sl.lu(a)[2], {"a": np.array([[1 + 1j, 0.5], [2.0, 1.0]])}, ["a"])  # 2 = |1| + |1|: tied
    assert not t.ok and "tied pivots" in t.problems[0]


def test_parameter_partials_where_the_function_is_not_defined():
    # c = -1 is a pole of hyp2f1 (scipy: inf), a < 0 outside gammainc's domain (scipy: nan): no number
    t = trace(lambda c: sc.hyp2f1(1.5, 0.5, c, 0.3), {"c": np.array([-1.0, 2.0])}, ["c"])
    d = t.jvp({"c": np.ones(2)})
    assert np.isnan(d[0]) and np.isfinite(d[1])
    t = trace(lambda a: sc.gammainc(a, 1.0), {"a": np.array([-0.5, 0.0, 1.0])}, ["a"])
    d = t.jvp({"a": np.ones(3)})
    assert np.isnan(d[0]) and np.isnan(d[1]) and np.isfinite(d[2])


# --- more of scipy.special: integrals, K Bessel functions, inverses ---------------------------------------
def _mp_inverse(f, start):
    """(*params, y) -> the x with f(*params, x) = y, to mpmath's working precision: Ridders' bracketing
    iteration on f itself, in a bracket of 1e-8 relative around scipy's float answer ``start(*params, y)``
    (used only to place the bracket)."""
    def inverse(*args):
        x0 = mpmath.mpf(float(start(*[float(v) for v in args])))
        return mpmath.findroot(lambda x: f(*args[:-1], x) - args[-1], (x0 * (1 - 1e-8), x0 * (1 + 1e-8)),
                               solver="ridder")

    return inverse


ONE_ARG = [
    ("entr", lambda x: sc.entr(x), lambda x: -x * mpmath.log(x), [1e-3, 0.4, 1.0, 7.0]),
    ("exp1", lambda x: sc.exp1(x), mpmath.e1, [1e-3, 0.5, 3.0, 40.0]),
    ("expi", lambda x: sc.expi(x), mpmath.ei, [-5.0, -0.1, 0.2, 3.0, 30.0]),
    ("spence", lambda z: sc.spence(z), lambda z: mpmath.polylog(2, 1 - z), [1e-3, 0.5, 1.0, 2.0, 30.0]),
    ("ellipk", lambda m: sc.ellipk(m), mpmath.ellipk, [-3.0, 0.0, 0.3, 0.95]),
    ("ellipe", lambda m: sc.ellipe(m), mpmath.ellipe, [-3.0, 0.0, 0.3, 0.95]),
    ("k0", lambda x: sc.k0(x), lambda x: mpmath.besselk(0, x), [1e-3, 0.5, 4.0, 60.0]),
    ("k1", lambda x: sc.k1(x), lambda x: mpmath.besselk(1, x), [1e-3, 0.5, 4.0, 60.0]),
    ("ndtri_exp", lambda y: sc.ndtri_exp(y), lambda y: mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.exp(y) - 1),
     [-30.0, -2.0, -0.1]),
]


@pytest.mark.parametrize("f, g, points", [c[1:] for c in ONE_ARG], ids=[c[0] for c in ONE_ARG])
def test_more_special_functions(f, g, points):
    x = np.array(points)
    assert_partial(lambda x: f(x), g, {"x": x}, "x", 1e-9)


@pytest.mark.parametrize("ufunc, mp", [(sc.kv, mpmath.besselk), (sc.yv, mpmath.bessely),
                                       (sc.expn, mpmath.expint)], ids=["kv", "yv", "expn"])
def test_bessel_k_y_and_expn_in_x(ufunc, mp):
    n, x = grid([0.0, 1.0, 2.0, 3.0], [0.05, 1.3, 9.0])
    args = {"n": n, "x": x}
    assert_partial(lambda n, x: ufunc(n, x), mp, args, "x", 1e-9)


def test_kn_and_refused_orders():
    x = np.array([0.3, 2.0])
    assert_partial(lambda x: sc.kn(2, x), lambda x: mpmath.besselk(2, x), {"x": x}, "x", 1e-9)
    t = trace(lambda v: sc.kv(v, 1.0), {"v": np.array([0.5])}, ["v"])
    assert not t.ok and "traced order" in t.problems[0]


def test_incomplete_gamma_inverses():
    p_inv, q_inv = _mp_inverse(_p, sc.gammaincinv), _mp_inverse(_q, sc.gammainccinv)
    a, y = grid([0.5, 2.0, 9.0], [1e-4, 0.3, 0.9])
    for ufunc, mp in [(sc.gammaincinv, p_inv), (sc.gammainccinv, q_inv)]:
        for name in ("a", "y"):
            assert_partial(lambda a, y: ufunc(a, y), mp, {"a": a, "y": y}, name, 1e-8)


def test_betaincinv_in_y():
    p, q, y = np.array([0.7, 2.0, 5.0]), np.array([1.5, 3.0, 0.8]), np.array([0.05, 0.5, 0.97])
    inv = _mp_inverse(lambda p, q, x: mpmath.betainc(p, q, 0, x, regularized=True), sc.betaincinv)
    got = traced_partial(lambda y: sc.betaincinv(p, q, y), {"y": y}, "y")
    want = [mp_derivative(lambda v, k=k: inv(mpmath.mpf(p[k]), mpmath.mpf(q[k]), v), y[k])[()] for k in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-8)


def test_more_special_functions_through_a_check():
    def f(x):
        return np.sum(sc.exp1(x) * sc.k1(x) + sc.ellipk(x / 4) + sc.gammaincinv(x, 0.4))

    checked_by_traced_ad(f, lambda x: fd_grad(f, x), x=np.array([0.4, 1.1, 2.5]))


@pytest.mark.parametrize("name", ["a", "b", "x"])
def test_betainc_in_its_parameters(name):
    # x = 0.999 at a = 3, b = 0.5: I is 1 to 2 digits only, but at b = 8 to 20: kept through 1 - I
    a, b, x = [v.ravel() for v in np.meshgrid([0.3, 3.0], [0.5, 8.0], [1e-3, 0.2, 0.7, 0.999])]
    assert_partial(lambda a, b, x: sc.betainc(a, b, x),
                   lambda a, b, x: mpmath.betainc(a, b, 0, x, regularized=True), {"a": a, "b": b, "x": x}, name, 1e-9)


def test_betainc_through_a_check():
    def f(a):
        return np.sum(sc.betainc(a, 2.0 * a, np.array([0.1, 0.5, 0.9])))

    checked_by_traced_ad(f, lambda a: fd_grad(f, a), a=np.array([0.5, 1.5, 4.0]))


def test_mpmath_partials_are_bounded_in_size():
    from gradcli.trace.special_more import MP_MAX_ELEMENTS
    z = np.linspace(-0.5, 0.5, MP_MAX_ELEMENTS + 1)
    t = trace(lambda a: sc.hyp2f1(a, 0.5, 2.0, z), {"a": np.array(1.5)}, ["a"])  # a scalar broadcast to z
    assert not t.ok and "elements for mpmath's partial" in t.problems[0]
    assert trace(lambda z: sc.hyp2f1(1.5, 0.5, 2.0, z), {"z": z}, ["z"]).ok  # z's partial is a closed form


def _eigh_invariants(a):
    w, v = la.eigh(a)
    return np.concatenate([np.ravel(w), np.ravel((v * w[..., None, :]) @ v.conj().swapaxes(-1, -2)),
                           np.ravel(np.abs(v) ** 2)])


@pytest.mark.parametrize("a", [_c(3, 3), _c(2, 3, 3)], ids=["complex", "stacked"])
def test_complex_eigh_vectors(a):
    # not Hermitian on purpose: eigh reads the lower triangle (Im of the diagonal unread)
    check_complex(_eigh_invariants, {"a": a}, ["a"])
    check_transpose_re(_eigh_invariants, {"a": a}, ["a"])
    check_complex(lambda a: la.eigh(a, UPLO="U")[1] * la.eigh(a, UPLO="U")[1].conj(), {"a": a}, ["a"])


def test_complex_eigh_gauge():
    a, da = _c(3, 3), _c(3, 3)
    h = np.tril(da) + np.tril(da, -1).conj().T
    h = h - 1j * np.diag(np.imag(np.diag(h)))
    w, v = la.eigh(a)
    dv = trace(lambda a: la.eigh(a)[1], {"a": a}, ["a"]).jvp({"a": da})
    x = v.conj().T @ dv  # anti-Hermitian (V stays unitary) with a zero diagonal (the phase convention)
    np.testing.assert_allclose(x + x.conj().T, 0, atol=1e-12)
    np.testing.assert_allclose(np.diag(x), 0, atol=1e-12)
    dw = trace(lambda a: la.eigh(a)[0], {"a": a}, ["a"]).jvp({"a": da})
    np.testing.assert_allclose(dw, np.real(np.diag(v.conj().T @ h @ v)), atol=1e-12)  # closed form


@pytest.mark.parametrize("a", [_c(3, 3), _c(4, 3), _c(2, 4, 2)], ids=["square", "tall", "stacked"])
def test_complex_qr(a):
    # LAPACK returns R with a real diagonal (of either sign): that fixes the phases, and the rule keeps it real
    check_complex(lambda a: la.qr(a)[0], {"a": a}, ["a"])
    check_complex(lambda a: la.qr(a)[1], {"a": a}, ["a"])
    check_complex(lambda a: la.qr(a, mode="r"), {"a": a}, ["a"])
    check_transpose_re(lambda a: la.qr(a)[0] + la.qr(a)[1].sum(), {"a": a}, ["a"])


@pytest.mark.parametrize("a, b", [(_c(4, 2), _c(4)), (_c(5, 3), _c(5, 2)), (_c(4, 2), rng.normal(size=4)),
                                  (rng.normal(size=(4, 2)), _c(4)), (_c(2, 4), _c(2))],
                         ids=["tall-vector", "tall-matrix", "real-b", "real-a", "wide"])
def test_complex_lstsq(a, b):
    for k in (0, 1):
        if k == 1 and a.shape[0] <= a.shape[1]:
            continue  # numpy gives residuals only for a tall A
        check_complex(lambda a, b, k=k: la.lstsq(a, b)[k], {"a": a, "b": b}, ["a", "b"])
        check_transpose_re(lambda a, b, k=k: la.lstsq(a, b)[k], {"a": a, "b": b}, ["a", "b"])


@pytest.mark.parametrize("fn, a", [
    (lambda a: sl.eigh(a)[1] * sl.eigh(a)[1][:1], SPD), (lambda a: sl.eigh(a, lower=False)[0], NOT_SYM.T),
    (lambda a: sl.eigh(a, eigvals_only=True), NOT_SYM), (lambda a: sl.eigvalsh(a, lower=False), NOT_SYM.T),
    (lambda a: sl.qr(a)[0], G), (lambda a: sl.qr(a)[1], G), (lambda a: sl.qr(a, mode="economic")[0], T4),
    (lambda a: sl.qr(a, mode="r")[0], T4), (lambda a: sl.norm(a, 2), G), (lambda a: sl.svdvals(a), T4),
    (lambda a: sl.block_diag(a, a[0], 2.0, a[:2, :1]), G), (lambda a: sl.toeplitz(a[0], a[1]), G),
    (lambda a: sl.toeplitz(a[:, 0]), G), (lambda a: sl.hankel(a[0], a[1, :2]), G),
    (lambda a: sl.hankel(a[0]), G), (lambda a: sl.circulant(a[0]), G),
], ids=["eigh-vectors", "eigh-upper", "eigh-values-only", "eigvalsh-upper", "qr-q", "qr-r", "qr-economic",
        "qr-r-mode-tall", "norm2", "svdvals", "block_diag", "toeplitz", "toeplitz-c", "hankel", "hankel-c",
        "circulant"])
def test_more_scipy_linalg(fn, a):
    # eigenvectors times their first row: free of the sign LAPACK picks (which may flip as A moves)
    t = check_against_numerics(fn, {"a": a}, ["a"])
    np.testing.assert_array_equal(t.value, fn(a))  # scipy's own values
    check_transpose(fn, {"a": a}, ["a"])


def test_scipy_eigh_and_qr_complex():
    a = _c(3, 3)
    h = a @ a.conj().T + np.eye(3)
    check_complex(lambda a: np.abs(sl.eigh(a)[1]) ** 2, {"a": h}, ["a"])
    check_complex(lambda a: sl.qr(a)[0], {"a": a}, ["a"])  # R's real diagonal fixes the phases
    np.testing.assert_array_equal(trace(lambda a: sl.qr(a)[1], {"a": a}, ["a"]).value, sl.qr(a)[1])


# --- scipy.stats: tails, quantiles, more families -----------------------------------------------------------
st = pytest.importorskip("scipy.stats")
DISTRIBUTIONS = [("norm", ()), ("t", (3.5,)), ("beta", (2.0, 3.0)), ("gamma", (2.5,)), ("chi2", (3.0,)),
                 ("expon", ()), ("laplace", ()), ("logistic", ()), ("cauchy", ()), ("uniform", ()),
                 ("gennorm", (1.5,))]
QUANTILES = {"norm", "beta", "gamma", "chi2", "expon", "laplace", "logistic", "cauchy", "uniform"}


KINDS = [(name, shapes, kind) for name, shapes in DISTRIBUTIONS
         for kind in ("sf", "logsf", "cdf", "logpdf") + (("ppf", "isf") if name in QUANTILES else ())]


@pytest.mark.parametrize("name, shapes, kind", KINDS, ids=[f"{n}-{k}" for n, _, k in KINDS])
def test_distribution_tails_and_quantiles(name, shapes, kind):
    dist = getattr(st, name)
    loc, scale = np.array(0.2), np.array(1.3)
    # for ppf/isf x is a probability; else points inside the support (loc + scale * [0.05 .. 0.9])
    x = np.array([0.02, 0.3, 0.6, 0.97]) if kind in ("ppf", "isf") else loc + scale * np.array([0.05, 0.4, 0.9])

    def f(x, loc, scale):  # looked up in the call: the trace substitutes the method while it runs
        return getattr(dist, kind)(x, *shapes, loc=loc, scale=scale)

    t = check_against_numerics(f, {"x": x, "loc": loc, "scale": scale}, ["x", "loc", "scale"])
    np.testing.assert_array_equal(t.value, f(x, loc, scale))  # scipy's own value


def test_distribution_tails_outside_the_support_and_far_out():
    t = trace(lambda x: st.gamma.logsf(x, 2.0), {"x": np.array([-1.0, 80.0])}, ["x"])
    # Q(2, x) = e^-x (1 + x): d log Q / dx = -x / (1 + x), and 0 below the support
    np.testing.assert_allclose(t.jvp({"x": np.ones(2)}), [0.0, -80 / 81], rtol=1e-12)
    t = trace(lambda x: st.norm.logsf(x), {"x": np.array([40.0])}, ["x"])  # where 1 - cdf is 0
    np.testing.assert_allclose(t.jvp({"x": np.ones(1)}), [-40.024984], rtol=1e-6)  # -phi/Q ~ -(x + 1/x)
    check_against_numerics(lambda b: st.gennorm.cdf(0.7, b), {"b": np.array([0.8, 1.5, 3.0])}, ["b"])


DISCRETE = [("bernoulli", lambda p: (p,), [0, 1]), ("geom", lambda p: (p,), [1, 2, 6]),
            ("binom", lambda p: (7, p), [0, 3, 7]), ("nbinom", lambda p: (2.5 + p, p), [0, 2, 9]),
            ("betabinom", lambda p: (6, 1 + p, 3 * p), [0, 2, 6])]


@pytest.mark.parametrize("kind", ["logpmf", "pmf"])
@pytest.mark.parametrize("name, params, ks", DISCRETE, ids=[d[0] for d in DISCRETE])
def test_discrete_distributions(name, params, ks, kind):
    k = np.array(ks)

    def f(p):
        return getattr(getattr(st, name), kind)(k, *params(p))

    p = np.full(k.shape, 0.35)
    t = check_against_numerics(f, {"p": p}, ["p"])
    np.testing.assert_array_equal(t.value, f(p))


def test_discrete_off_the_support_and_plain_counts():
    t = trace(lambda p: st.binom.logpmf(np.array([2, 9]), 7, p), {"p": np.array([0.4, 0.4])}, ["p"])
    assert t.ok and t.value[1] == -np.inf
    np.testing.assert_allclose(t.jvp({"p": np.ones(2)}), [2 / 0.4 - 5 / 0.6, 0.0])  # k/p - (n-k)/(1-p)
    t = trace(lambda n: st.binom.logpmf(2, n, 0.4), {"n": np.array(7.0)}, ["n"])
    assert not t.ok and "traced n" in t.problems[0]


# --- numpy 2's array-API names, polynomial helpers, cond, tensorsolve/inv, copysign, modf, divmod -------------
V4 = np.array([0.3, 1.7, 2.2, 0.9])
W4 = np.array([-1.0, 2.0, -0.5, 0.4])
ALIASES = {
    "modf": lambda x: np.modf(x)[0] * x, "divmod": lambda x: np.divmod(x, 0.7)[1] + np.divmod(2.0, x)[1],
    "copysign": lambda x: np.copysign(x, W4) + np.copysign(W4, x), "polyder": lambda x: np.polyder(x, 2),
    "polyint": lambda x: np.polyint(x, 2, k=[1.0, 2.0]), "polymul": lambda x: np.polymul(x, x[:2]),
    "poly": lambda x: np.poly(x), "roots": lambda x: np.abs(np.roots(x)) + np.real(np.roots(x)),
    "cond": lambda x: np.linalg.cond(np.diag(x) + 1), "cond-1": lambda x: np.linalg.cond(np.outer(x, W4) + 3 * np.eye(4), 1),
    "tensorsolve": lambda x: np.linalg.tensorsolve(np.diag(x + 1).reshape(4, 2, 2), x),
    "tensorinv": lambda x: np.linalg.tensorinv(np.diag(x + 1).reshape(2, 2, 2, 2)),
    "cumulative_sum": lambda x: np.cumulative_sum(x, include_initial=True),
    "matrix_transpose": lambda x: np.matrix_transpose(np.outer(x, W4)), "vecdot": lambda x: np.vecdot(x, W4),
    "linalg.outer": lambda x: np.linalg.outer(x, W4), "linalg.cross": lambda x: np.linalg.cross(x[:3], x[1:]),
    "linalg.trace": lambda x: np.linalg.trace(np.outer(x, W4)),
    "linalg.diagonal": lambda x: np.linalg.diagonal(np.outer(x, W4), offset=1),
    "linalg.matmul": lambda x: np.linalg.matmul(np.outer(x, W4), x),
    "linalg.tensordot": lambda x: np.linalg.tensordot(x, W4, axes=1), "linalg.vecdot": lambda x: np.linalg.vecdot(x, W4),
}


NUMPY2_ONLY = {"cumulative_sum", "matrix_transpose", "vecdot", "linalg.outer", "linalg.cross", "linalg.trace",
               "linalg.diagonal", "linalg.matmul", "linalg.tensordot", "linalg.vecdot"}


@pytest.mark.parametrize("name", [n for n in ALIASES if n not in NUMPY2_ONLY or hasattr(np, "cumulative_sum")])
def test_numpy_aliases_and_helpers(name):
    t = check_against_numerics(ALIASES[name], {"x": V4}, ["x"])
    np.testing.assert_array_equal(t.value, ALIASES[name](V4))  # numpy's own value
    check_transpose(ALIASES[name], {"x": V4}, ["x"])


@pytest.mark.parametrize("kw", [{}, {"w": np.arange(1.0, 6.0)}], ids=["plain", "weighted"])
def test_polyfit_in_samples_and_values(kw):
    x, y = np.array([0.0, 0.5, 1.3, 2.0, 3.1]), np.array([1.0, 0.2, -0.4, 2.0, 3.0])
    t = check_against_numerics(lambda x, y: np.polyfit(x, y, 2, **kw), {"x": x, "y": y}, ["x", "y"])
    np.testing.assert_array_equal(t.value, np.polyfit(x, y, 2, **kw))
    # an exact line through the points: the slope's derivative in y is the least-squares weights
    t = trace(lambda y: np.polyfit(x, y, 1), {"y": 2 * x + 1}, ["y"])
    np.testing.assert_allclose(t.vjp(np.array([1.0, 0.0]))["y"], (x - x.mean()) / np.sum((x - x.mean()) ** 2),
                               rtol=1e-10)


def test_roots_closed_form_and_refusal():
    # roots of (x - r1)(x - r2) = x^2 - (r1 + r2) x + r1 r2: dr1/dc = -1 / (r1 - r2) for the constant term c
    t = trace(lambda p: np.roots(p), {"p": np.array([1.0, -5.0, 6.0])}, ["p"])
    got = dict(zip(np.round(t.value.real), t.jvp({"p": np.array([0.0, 0.0, 1.0])}).real))
    np.testing.assert_allclose([got[3.0], got[2.0]], [-1.0, 1.0], rtol=1e-12)
    t = trace(lambda p: np.roots(p), {"p": np.array([1.0, -5.0, 0.0])}, ["p"])
    assert not t.ok and "trailing zero" in t.problems[0]
