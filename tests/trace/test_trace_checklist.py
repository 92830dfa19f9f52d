"""autograd's checklist in the tracer: np.convolve, np.nansum and np.nanmean; scipy.special's Bessel
functions, incomplete gammas, beta, rgamma, erfcx and multigammaln; scipy.stats' t, beta, gamma, chi2,
expon, laplace, logistic, poisson and dirichlet; scipy.linalg's solve_triangular, cholesky, sqrtm and
expm; scipy.signal.convolve. Each against central differences, and what is refused named as such."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

sc = pytest.importorskip("scipy.special")
st = pytest.importorskip("scipy.stats")
sl = pytest.importorskip("scipy.linalg")
ss = pytest.importorskip("scipy.signal")

from trace_helpers import check_against_numerics, check_transpose, refused  # noqa: E402

from gradcli.trace import trace  # noqa: E402

rng = np.random.default_rng(5)
M = rng.normal(size=(3, 3))
SPD = M @ M.T + np.eye(3)


def _box(low, high, shape=(2, 3)):
    return np.random.default_rng(2).uniform(low, high, size=shape)


# --- numpy ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("sizes", [(5, 3), (3, 5), (4, 4), (1, 3), (4, 1)], ids=str)
def test_convolve(mode, sizes):
    inputs = {"a": rng.normal(size=sizes[0]), "v": rng.normal(size=sizes[1])}
    check_against_numerics(lambda a, v: np.convolve(a, v, mode), inputs, ["a", "v"])
    check_against_numerics(lambda a, v: np.convolve(a, v, mode=mode), inputs, ["a"])


def test_convolve_complex_is_its_own_adjoint():
    a, v = rng.normal(size=4) + 1j * rng.normal(size=4), rng.normal(size=3) - 0.5j
    check_transpose(lambda a, v: np.convolve(a, v, "same"), {"a": a, "v": v}, ["a", "v"])


NAN = np.array([[0.3, np.nan, -1.2, 2.0], [np.nan, 0.5, 1.1, -0.4], [1.5, 0.2, np.nan, 0.7]])


@pytest.mark.parametrize("f", [np.nansum, np.nanmean], ids=lambda f: f.__name__)
@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 1)}], ids=str)
def test_nan_reductions(f, kw):
    t = check_against_numerics(lambda x: f(x, **kw), {"x": NAN}, ["x"])
    assert np.all(t.vjp(np.ones(t.value.shape))["x"][np.isnan(NAN)] == 0)


def nanmean_all_nan(x):
    return np.nanmean(x, axis=0)  # <- here


def test_nanmean_of_an_all_nan_slice_is_refused():
    with pytest.warns(RuntimeWarning):
        refused(nanmean_all_nan, {"x": np.array([[np.nan, 1.0], [np.nan, 2.0]])}, ["x"],
                "np.nanmean (an all-NaN slice")


# --- scipy.special -------------------------------------------------------------------------------------
UNARY = [(sc.j0, (-6, 6)), (sc.j1, (-6, 6)), (sc.y0, (0.3, 6)), (sc.y1, (0.3, 6)), (sc.i0, (-3, 3)),
         (sc.i1, (-3, 3)), (sc.rgamma, (-2.8, 3)), (sc.erfcx, (-2, 4))]


@pytest.mark.parametrize("ufunc, box", UNARY, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shape", [(2, 3), ()], ids=str)
def test_unary(ufunc, box, shape):
    check_against_numerics(lambda x: ufunc(x), {"x": _box(*box, shape)}, ["x"])


@pytest.mark.parametrize("ufunc, order, box", [(sc.jn, 2, (-5, 5)), (sc.jv, 1.5, (0.2, 5)),
                                               (sc.yn, 0, (0.3, 5)), (sc.yn, 3, (0.5, 5)),
                                               (sc.iv, 2.5, (0.2, 3)), (sc.ive, 1, (-3, 3)),
                                               (sc.ive, 0.5, (0.2, 4))],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_bessel_of_order(ufunc, order, box):
    check_against_numerics(lambda x: ufunc(order, x), {"x": _box(*box)}, ["x"])
    orders = np.array([[order], [order + 1]])  # broadcast against x
    check_against_numerics(lambda x: ufunc(orders, x), {"x": _box(*box, (1, 3))}, ["x"])


def test_rgamma_at_the_poles_of_gamma():
    x = np.array([0.0, -1.0, -2.0, -3.0])
    t = trace(lambda x: sc.rgamma(x), {"x": x}, ["x"])
    np.testing.assert_allclose(t.vjp(np.ones(4))["x"], [1.0, -1.0, 2.0, -6.0])  # (-1)^n n!
    check_against_numerics(lambda x: sc.rgamma(x), {"x": x}, ["x"], rtol=1e-5)


def test_ive_at_zero():
    t = trace(lambda x: sc.ive(1, x), {"x": np.array([0.0])}, ["x"])
    np.testing.assert_allclose(t.vjp(np.ones(1))["x"], [0.5])  # I1'(0); ive(0, x) has a kink there
    assert np.isnan(trace(lambda x: sc.ive(0, x), {"x": np.array([0.0])}, ["x"]).vjp(np.ones(1))["x"][0])


@pytest.mark.parametrize("ufunc", [sc.gammainc, sc.gammaincc], ids=lambda u: u.__name__)
def test_incomplete_gamma_in_x(ufunc):
    check_against_numerics(lambda x: ufunc(np.array([0.7, 1.0, 3.5]), x), {"x": _box(0.2, 4, (2, 3))}, ["x"])


def test_beta_and_multigammaln():
    check_against_numerics(lambda a, b: sc.beta(a, b), {"a": _box(0.3, 3), "b": _box(0.5, 2, (3,))}, ["a", "b"])
    check_against_numerics(lambda a: sc.multigammaln(a, 3), {"a": _box(1.2, 4)}, ["a"])
    check_against_numerics(lambda a: sc.multigammaln(a, 1), {"a": np.array(2.5)}, ["a"])


def stdtr_traced_shape(a, x):
    return sc.stdtr(a, x)  # <- here


def jv_traced_order(n, x):
    return sc.jv(n, x)  # <- here


def multigammaln_traced_d(a, d):
    return sc.multigammaln(a, d)  # <- here


def test_traced_shape_or_order_is_refused():
    one = {"a": np.array([1.5]), "x": np.array([0.4])}
    refused(stdtr_traced_shape, one, ["a", "x"], "np.stdtr (traced shape parameter")
    refused(jv_traced_order, {"n": np.array([1.0]), "x": np.array([2.0])}, ["n"], "np.jv (traced order")
    refused(multigammaln_traced_d, {"a": np.array(3.0), "d": np.array(2)}, ["a", "d"],
            "scipy.special.multigammaln (traced d")


# --- scipy.stats ---------------------------------------------------------------------------------------
CONTINUOUS = [("t", (2.5,), (-3, 3)), ("beta", (1.5, 2.5), (0.1, 0.9)), ("gamma", (2.2,), (0.2, 4)),
              ("chi2", (3.0,), (0.2, 5)), ("expon", (), (0.3, 3)), ("laplace", (), (-2, 2)),
              ("logistic", (), (-4, 4))]


@pytest.mark.parametrize("kind", ["logpdf", "pdf", "cdf", "logcdf"])
@pytest.mark.parametrize("name, shapes, box", CONTINUOUS, ids=lambda v: v if isinstance(v, str) else "")
def test_continuous_distributions(name, shapes, box, kind):
    dist = getattr(st, name)
    inputs = {"x": _box(*box, (4,)), "loc": np.array(0.05), "scale": np.array(1.3),
              **{f"s{i}": np.array(s) for i, s in enumerate(shapes)}}
    wrt = ["x", "loc", "scale"] + ([] if "cdf" in kind else [f"s{i}" for i in range(len(shapes))])

    def f(x, loc, scale, **s):
        return getattr(dist, kind)(x, *[s[f"s{i}"] for i in range(len(shapes))], loc=loc, scale=scale)

    check_against_numerics(f, inputs, wrt)
    if kind == "logpdf":  # positional loc and scale, and a frozen distribution
        check_against_numerics(lambda x, **_: getattr(dist, kind)(x, *shapes, 0.1, 2.0), inputs, ["x"])
        check_against_numerics(lambda x, **_: dist(*shapes, scale=2.0).logpdf(x), inputs, ["x"])
        named = dict(zip([n.strip() for n in (dist.shapes or "").split(",") if n.strip()], shapes))
        check_against_numerics(lambda x, loc, **_: getattr(dist, kind)(x, loc=loc, **named), inputs,
                               ["x", "loc"])


@pytest.mark.parametrize("name, shapes, x", [("beta", (1.5, 2.5), [-0.5, 0.3, 1.5]),
                                             ("gamma", (2.0,), [-1.0, 0.5, 2.0]),
                                             ("expon", (), [-1.0, 0.5, 2.0])], ids=str)
def test_outside_the_support_is_constant(name, shapes, x):
    x = np.array(x)
    for kind in ("logpdf", "cdf"):
        t = trace(lambda x: getattr(getattr(st, name), kind)(x, *shapes), {"x": x}, ["x"])
        assert t.ok, t.problems
        np.testing.assert_array_equal(t.value, getattr(getattr(st, name), kind)(x, *shapes))
        g = t.vjp(np.ones(3))["x"]
        assert g[0] == 0 and np.isfinite(g[1]) and g[1] != 0


@pytest.mark.parametrize("kind", ["logpmf", "pmf", "cdf"])
def test_poisson_in_the_rate(kind):
    k = np.array([0.0, 1.0, 3.0, 7.0, 2.5 if kind != "logpmf" else 4.0])  # logpmf(2.5) is -inf
    check_against_numerics(lambda mu: getattr(st.poisson, kind)(k, mu), {"mu": _box(0.5, 5, (5,))}, ["mu"])


@pytest.mark.parametrize("kind", ["logpdf", "pdf"])
def test_dirichlet(kind):
    alpha, x = np.array([1.5, 2.0, 3.0]), np.array([[0.2, 0.5], [0.3, 0.1]])  # the last component implied
    def f(x, alpha):
        return getattr(st.dirichlet, kind)(x, alpha)

    check_against_numerics(f, {"x": x, "alpha": alpha}, ["x", "alpha"])
    check_against_numerics(lambda alpha: f(np.array([0.2, 0.3, 0.5]), alpha), {"alpha": alpha}, ["alpha"])


def poisson_traced_k(k):
    return st.poisson.logpmf(k, 2.0)  # <- here


def t_cdf_traced_shape(a):
    return st.t.cdf(0.3, a)  # <- here


def laplace_bad_scale(x):
    return st.laplace.logpdf(x, scale=-1.0)  # <- here


def t_unknown_keyword(x):
    return st.t.logpdf(x, 3.0, moments="m")  # <- here


def test_distribution_refusals():
    with pytest.raises(TypeError):  # scipy's own error comes first, as without a trace
        trace(t_unknown_keyword, {"x": np.array([0.1])}, ["x"])
    refused(poisson_traced_k, {"k": np.array([1.0])}, ["k"], "scipy.stats.poisson.logpmf (traced k")
    refused(t_cdf_traced_shape, {"a": np.array(1.5)}, ["a"], "np.stdtr (traced shape parameter")
    check_against_numerics(lambda a: st.beta.cdf(0.3, a, 2.0), {"a": np.array(1.5)}, ["a"])  # betainc's a
    refused(laplace_bad_scale, {"x": np.array([0.1])}, ["x"], "scipy.stats.laplace.logpdf (scale <= 0")


# --- scipy.linalg and scipy.signal ---------------------------------------------------------------------
@pytest.mark.parametrize("lower, trans, unit", [(False, 0, False), (True, 1, False), (False, "T", True),
                                                (True, 2, True), (True, "N", False)], ids=str)
def test_solve_triangular(lower, trans, unit):
    inputs = {"a": M + 3 * np.eye(3), "b": rng.normal(size=(3, 2))}
    check_against_numerics(lambda a, b: sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
                           inputs, ["a", "b"])
    check_against_numerics(lambda a, b: sl.solve_triangular(a, b[:, 0], trans, lower), inputs, ["a", "b"])


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_reads_one_triangle(lower):
    t = check_against_numerics(lambda a: sl.cholesky(a, lower=lower), {"a": SPD}, ["a"])
    g = t.vjp(rng.normal(size=(3, 3)))["a"]
    assert np.all((np.triu(g, 1) if lower else np.tril(g, -1)) == 0)


def test_sqrtm_and_expm():
    check_against_numerics(lambda a: sl.sqrtm(a), {"a": SPD + 0.3 * M}, ["a"])
    check_against_numerics(lambda a: sl.expm(a), {"a": M}, ["a"])
    check_against_numerics(lambda a: sl.expm(a), {"a": np.array([[0.3]])}, ["a"])


def test_complex_expm_sqrtm_and_signal_convolve_transpose():
    z = M + 0.5j * np.eye(3)
    check_transpose(lambda a: sl.expm(a), {"a": z}, ["a"])
    check_transpose(lambda a: sl.sqrtm(a), {"a": SPD + 0.4j * M}, ["a"])
    kernel = np.array([[1.0, 2.0j]])
    check_transpose(lambda a, b: ss.convolve(a, b, "same"), {"a": z, "b": kernel}, ["a", "b"])


def sqrtm_singular(a):
    return sl.sqrtm(a)  # <- here


def sqrtm_complex(a):
    return sl.sqrtm(a)  # <- here


def solve_triangular_batched(a, b):
    return sl.solve_triangular(a, b)  # <- here


def test_linalg_refusals():
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's own warning about the singular matrix
        refused(sqrtm_singular, {"a": np.array([[1.0, 0.0], [0.0, 0.0]])}, ["a"],
                "scipy.linalg.sqrtm (a singular matrix")
        refused(sqrtm_complex, {"a": np.array([[-1.0, 0.0], [0.0, 2.0]])}, ["a"],
                "scipy.linalg.sqrtm (a complex square root")
    stack = np.broadcast_to(np.eye(2) * 2, (3, 2, 2)).copy()  # a stack is traced (test_trace_scipy_lu.py)
    assert trace(solve_triangular_batched, {"a": stack, "b": np.ones((3, 2, 1))}, ["a"]).ok


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", [((4, 5), (2, 3)), ((2, 3), (4, 5)), ((3,), (5,)), ((6,), (2,))], ids=str)
def test_signal_convolve(mode, shapes):
    if mode == "valid" and len(shapes[0]) == 2 and shapes[0][0] < shapes[1][0]:
        shapes = shapes[::-1]  # scipy's valid mode wants one input at least as large in every axis
    inputs = {"a": rng.normal(size=shapes[0]), "b": rng.normal(size=shapes[1])}
    check_against_numerics(lambda a, b: ss.convolve(a, b, mode), inputs, ["a", "b"])
    check_against_numerics(lambda a, b: ss.convolve(a, b, mode=mode, method="fft"), inputs, ["a"])
