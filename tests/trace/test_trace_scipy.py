"""scipy in the tracer: scipy.special's ufuncs, the python-level functions substituted while a trace
runs (logsumexp, softmax, log_softmax, polygamma, scipy.stats.norm and multivariate_normal), their
restoration, and ML losses written with them."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

sc = pytest.importorskip("scipy.special")
st = pytest.importorskip("scipy.stats")

from scipy.special import log_softmax, logsumexp, softmax  # noqa: E402  a model file's from-imports
from scipy.stats import multivariate_normal, norm  # noqa: E402
from trace_helpers import check_against_numerics, check_transpose, refused  # noqa: E402

from gradcli.trace import kind_of, trace  # noqa: E402

rng = np.random.default_rng(3)
ORIGINALS = {name: getattr(sc, name) for name in ("logsumexp", "softmax", "log_softmax", "polygamma")}
NORM_CLASS, MVN_CLASS = type(st.norm), type(st.multivariate_normal)
MVN_METHODS = {k: vars(MVN_CLASS)[k] for k in ("logpdf", "pdf")}
A = rng.normal(size=(2, 3, 4))
SPD = np.array([[2.0, 0.3, -0.2], [0.3, 1.0, 0.1], [-0.2, 0.1, 1.5]])


def _box(low, high, shape=(3, 4)):
    return np.random.default_rng(1).uniform(low, high, size=shape)


# --- ufuncs -------------------------------------------------------------------------------------------
UNARY = [(sc.expit, (-4, 4)), (sc.logit, (0.1, 0.9)), (sc.erf, (-2, 2)), (sc.erfc, (-2, 2)),
         (sc.erfinv, (-0.9, 0.9)), (sc.erfcinv, (0.1, 1.9)), (sc.gammaln, (0.5, 4)),
         (sc.gammaln, (-2.7, -2.2)), (sc.digamma, (0.5, 4)), (sc.log_expit, (-4, 4)), (sc.ndtr, (-3, 3)),
         (sc.ndtri, (0.05, 0.95)), (sc.log_ndtr, (-5, 3)), (sc.gamma, (0.5, 3)), (sc.gamma, (-1.7, -1.2)),
         (sc.expm1, (-2, 2)), (sc.log1p, (-0.5, 2))]


@pytest.mark.parametrize("ufunc, box", UNARY, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shape", [(3, 4), (), (1, 3, 1)], ids=str)
def test_unary_ufuncs(ufunc, box, shape):
    check_against_numerics(lambda x: ufunc(x), {"x": _box(*box, shape)}, ["x"])


def test_scipy_expm1_and_log1p_are_their_own_ufuncs():
    assert sc.expm1 is not np.expm1 and sc.log1p is not np.log1p
    assert kind_of(sc.expm1) == kind_of(sc.log1p) == "differentiable"


def test_psi_is_digamma_one_route():
    assert sc.psi is sc.digamma
    assert kind_of(sc.psi) == "differentiable"


BINARY = [(sc.xlogy, (-2, 2), (0.5, 2)), (sc.xlog1py, (-2, 2), (-0.5, 2)), (sc.betaln, (0.5, 3), (0.5, 3))]


@pytest.mark.parametrize("ufunc, xbox, ybox", BINARY, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (4,))], ids=str)
def test_binary_ufuncs(ufunc, xbox, ybox, shapes):
    inputs = {"x": _box(*xbox, shapes[0]), "y": _box(*ybox, shapes[1])}
    check_against_numerics(lambda x, y: ufunc(x, y), inputs, ["x", "y"])
    check_transpose(lambda x, y: ufunc(x, y), inputs, ["x", "y"])


def test_xlogy_at_x_zero_follows_scipys_zero():
    # xlogy(0, y) = 0 for every y: d/dy is 0 there, also at y = 0; d/dx is log(y), -inf at y = 0
    x, y = np.array([0.0, 0.0, 2.0]), np.array([0.0, 3.0, 0.5])
    t = trace(lambda x, y: sc.xlogy(x, y), {"x": x, "y": y}, ["x", "y"])
    assert t.ok, t.problems
    g = t.vjp(np.ones(3))
    np.testing.assert_array_equal(g["y"], [0.0, 0.0, 4.0])
    np.testing.assert_array_equal(g["x"], [-np.inf, np.log(3.0), np.log(0.5)])
    # a zero tangent in x stays zero against the infinite partial
    np.testing.assert_array_equal(t.jvp({"x": np.zeros(3), "y": np.ones(3)}), [0.0, 0.0, 4.0])
    t = trace(lambda x, y: sc.xlog1py(x, y), {"x": x, "y": y - 1}, ["y"])
    np.testing.assert_array_equal(t.vjp(np.ones(3))["y"], [0.0, 0.0, 2.0 / 0.5])


def test_cross_entropy_with_xlogy_has_zero_gradient_where_the_label_is_zero():
    p = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    q = np.array([[0.7, 0.0, 0.3], [0.2, 0.8, 1e-300]])
    t = trace(lambda q: -np.sum(sc.xlogy(p, q)), {"q": q}, ["q"])
    g = t.gradient()["q"]
    np.testing.assert_allclose(g, np.where(p == 0, 0.0, -p / np.where(p == 0, 1.0, q)))


def test_log_ndtr_far_in_the_lower_tail():
    x = np.array([-40.0, -10.0, 0.0, 5.0])
    want = np.sqrt(2 / np.pi) / sc.erfcx(-x / np.sqrt(2))  # phi / Phi through the scaled erfc
    t = trace(lambda x: sc.log_ndtr(x), {"x": x}, ["x"])
    np.testing.assert_allclose(t.vjp(np.ones(4))["x"], want, rtol=1e-12)


@pytest.mark.parametrize("ufunc", [sc.erf, sc.erfc, sc.ndtr, sc.log_ndtr, sc.gamma, sc.expm1, sc.log1p],
                         ids=lambda u: u.__name__)
def test_holomorphic_ufuncs_on_complex_input(ufunc):
    z, h = np.array([0.3 + 0.4j, -0.5 + 0.2j, 1.1 - 0.3j]), 1e-6
    t = trace(lambda z: ufunc(z), {"z": z}, ["z"])
    assert t.ok, t.problems
    np.testing.assert_allclose(t.jvp({"z": np.ones(3)}), (ufunc(z + h) - ufunc(z - h)) / (2 * h), rtol=1e-7)


def test_xlogy_on_complex_input():
    x, y, h = np.array([0.5 + 0.1j, 0.0]), np.array([1.2 - 0.4j, 0.7 + 0.2j]), 1e-6
    t = trace(lambda y: sc.xlogy(x, y), {"y": y}, ["y"])
    np.testing.assert_allclose(t.jvp({"y": np.ones(2)}), (sc.xlogy(x, y + h) - sc.xlogy(x, y - h)) / (2 * h),
                               rtol=1e-7)


def digamma_of_complex(z):
    return sc.digamma(z)  # <- here


def test_complex_digamma_is_refused():
    refused(digamma_of_complex, {"z": np.array([1.0 + 1.0j])}, ["z"], "np.psi (complex input)")


def test_unsupported_ufunc_option_is_refused():
    def f(x):
        return np.sum(sc.expit(x, order="F"))  # <- here

    refused(f, {"x": np.ones(3)}, ["x"], "np.expit (order=)")


def test_polygamma_with_a_constant_order():
    n = np.array([0, 1, 2, 3])
    check_against_numerics(lambda x: sc.polygamma(n, x), {"x": _box(0.5, 3)}, ["x"])
    check_against_numerics(lambda x: sc.polygamma(1, x), {"x": np.array(1.7)}, ["x"])
    assert kind_of(ORIGINALS["polygamma"]) == "differentiable"


def polygamma_of_traced_order(n, x):
    return sc.polygamma(n, x)  # <- here


def test_polygamma_with_a_traced_order_is_refused():
    refused(polygamma_of_traced_order, {"n": np.array([1.0]), "x": np.array([2.0])}, ["n", "x"],
            "scipy.special.polygamma (traced n")


# --- logsumexp, softmax, log_softmax ----------------------------------------------------------------
LSE_OPTIONS = [{}, {"axis": 0}, {"axis": -1}, {"axis": (0, 2)}, {"axis": 1, "keepdims": True},
               {"keepdims": True}]


@pytest.mark.parametrize("kw", LSE_OPTIONS, ids=str)
def test_logsumexp_options(kw):
    check_against_numerics(lambda a: logsumexp(a, **kw), {"a": A}, ["a"])


@pytest.mark.parametrize("kw", [{}, {"axis": 1}, {"axis": -1, "keepdims": True}], ids=str)
def test_logsumexp_with_weights(kw):
    b = rng.uniform(0.5, 2.0, size=(3, 4))
    check_against_numerics(lambda a, b: sc.logsumexp(a, b=b, **kw), {"a": A, "b": b}, ["a", "b"])


@pytest.mark.parametrize("kw", [{}, {"axis": -1}, {"axis": (0, 2), "keepdims": True}], ids=str)
def test_logsumexp_drops_terms_where_a_plain_b_is_zero(kw):
    zeros = np.array([1.0, 0.0, 2.0, 0.0])
    a = A.copy()
    a[..., 1] = np.inf  # dropped by b = 0 from the value and from the derivative
    check_against_numerics(lambda a: sc.logsumexp(a, b=zeros, **kw), {"a": a}, ["a"])


def test_logsumexp_return_sign():
    a, b = A[0], np.array([[1.0, -2.0, 0.5, 0.1], [-1.0, -1.0, 0.2, 0.3], [1.0, 1.0, 1.0, 1.0]])
    sign = sc.logsumexp(a, axis=1, b=b, return_sign=True)[1]
    assert set(sign) == {-1.0, 1.0}
    for wrt in (["a"], ["a", "b"]):
        check_against_numerics(lambda a, b: sc.logsumexp(a, axis=1, b=b, return_sign=True),
                               {"a": a, "b": b}, wrt, output=0)
    t = trace(lambda a: sc.logsumexp(a, axis=1, b=b, return_sign=True), {"a": a}, ["a"], output=1)
    np.testing.assert_array_equal(t.value, sign)  # the sign is a plain array: piecewise constant


def test_logsumexp_0d_and_size_1():
    check_against_numerics(lambda a: logsumexp(a), {"a": np.array(0.7)}, ["a"])
    check_against_numerics(lambda a: logsumexp(a, keepdims=True), {"a": np.array(0.7)}, ["a"])
    check_against_numerics(lambda a: logsumexp(a, axis=0), {"a": rng.normal(size=(1, 3, 1))}, ["a"])


def test_logsumexp_large_values_do_not_overflow():
    a = np.array([1000.0, 999.0, -1000.0])
    g = trace(lambda a: logsumexp(a), {"a": a}, ["a"]).gradient()["a"]
    np.testing.assert_allclose(g, sc.softmax(a), rtol=1e-13)


def lse_negative_sum(a):
    return sc.logsumexp(a, b=np.array([1.0, -3.0]))  # <- here


def lse_complex(a):
    return logsumexp(a * 1j)  # <- here


def test_logsumexp_refusals_are_named():
    refused(lse_negative_sum, {"a": np.array([0.1, 0.2])}, ["a"],
            "scipy.special.logsumexp (b= makes a sum negative")
    refused(lse_complex, {"a": np.array([0.1, 0.2])}, ["a"], "scipy.special.logsumexp (complex input)")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)], ids=str)
def test_softmax_and_log_softmax(name, axis):
    check_against_numerics(lambda x: getattr(sc, name)(x, axis=axis), {"x": A}, ["x"])
    check_transpose(lambda x: getattr(sc, name)(x, axis=axis), {"x": A}, ["x"])


def test_from_imported_names_are_substituted_too():
    check_against_numerics(lambda x: softmax(x, axis=1) + log_softmax(x, axis=1), {"x": A}, ["x"])


def captured_reference(x, lse=ORIGINALS["logsumexp"]):
    return lse(x)  # <- here


def test_a_captured_reference_reaches_scipy_and_the_cut_is_reported():
    # a default argument, a closure or a container holding scipy's function is not rebound
    refused(captured_reference, {"x": A}, ["x"], "conversion to a plain ndarray")


def test_softmax_0d():
    check_against_numerics(lambda x: sc.softmax(x), {"x": np.array(2.0)}, ["x"])
    check_against_numerics(lambda x: sc.log_softmax(x, axis=0), {"x": np.array([[0.3, 1.0]])}, ["x"])


# --- scipy.stats -------------------------------------------------------------------------------------
NORM_CALLS = [
    lambda d, x, loc, scale: d(x, loc=loc, scale=scale),
    lambda d, x, loc, scale: d(x, loc, scale),
    lambda d, x, loc, scale: d(x, scale=scale),
    lambda d, x, loc, scale: d(x),
]


@pytest.mark.parametrize("kind", ["logpdf", "pdf", "cdf", "logcdf"])
@pytest.mark.parametrize("call", range(len(NORM_CALLS)))
def test_norm(kind, call):
    f = NORM_CALLS[call]
    inputs = {"x": rng.normal(size=(3, 4)), "loc": rng.normal(size=(4,)),
              "scale": rng.uniform(0.5, 2, (3, 1))}
    check_against_numerics(lambda x, loc, scale: f(getattr(norm, kind), x, loc, scale), inputs,
                           ["x", "loc", "scale"])
    check_against_numerics(lambda x: f(getattr(st.norm, kind), x, 0.3, 1.7), {"x": np.array(-0.4)}, ["x"])


def test_frozen_norm():
    inputs = {"y": rng.normal(size=5), "mu": rng.normal(size=5), "s": np.array(1.3)}
    check_against_numerics(lambda y, mu, s: norm(loc=mu, scale=s).logpdf(y), inputs, ["y", "mu", "s"])
    check_against_numerics(lambda y, mu, s: st.norm(mu, s).cdf(y), inputs, ["y", "mu", "s"])


def frozen_mvn(x, mean):
    return multivariate_normal(mean, SPD).logpdf(x)  # <- here


def test_frozen_multivariate_normal_is_a_reported_cut():
    inputs = {"x": np.zeros(3), "mean": np.ones(3)}
    refused(frozen_mvn, inputs, ["x", "mean"], "conversion to a plain ndarray")


def norm_bad_scale(x):
    return norm.logpdf(x, scale=np.array([1.0, -1.0]))  # <- here


def test_norm_with_a_nonpositive_scale_is_refused():
    t = refused(norm_bad_scale, {"x": np.array([0.1, 0.2])}, ["x"], "scipy.stats.norm.logpdf (scale <= 0")
    assert np.isnan(t.value[1])


MVN_COVS = {"matrix": SPD, "scalar": 1.7, "diagonal": np.array([0.5, 1.0, 2.0]),
            "lower triangle read": np.triu(SPD + 5.0) + np.tril(SPD, -1)}


@pytest.mark.parametrize("kind", ["logpdf", "pdf"])
@pytest.mark.parametrize("cov", list(MVN_COVS), ids=str)
def test_multivariate_normal_in_x_and_mean(kind, cov):
    c = MVN_COVS[cov]
    inputs = {"x": rng.normal(size=(5, 3)), "mean": rng.normal(size=3)}
    check_against_numerics(lambda x, mean: getattr(multivariate_normal, kind)(x, mean=mean, cov=c), inputs,
                           ["x", "mean"])
    check_against_numerics(lambda x: getattr(st.multivariate_normal, kind)(x, np.zeros(3), c),
                           {"x": rng.normal(size=3)}, ["x"])  # one point: a 0-d result


def test_multivariate_normal_shapes():
    mvn = st.multivariate_normal
    # dim 1: a 1-d x is 4 points
    check_against_numerics(lambda x: mvn.logpdf(x, cov=2.0), {"x": rng.normal(size=4)}, ["x"])
    check_against_numerics(lambda x: mvn.logpdf(x, mean=[0.5], cov=[[2.0]]), {"x": np.array(0.3)}, ["x"])
    check_against_numerics(lambda x: mvn.logpdf(x, cov=SPD), {"x": rng.normal(size=(2, 1, 3))}, ["x"])


def mvn_traced_cov(x, cov):
    return multivariate_normal.logpdf(x, mean=np.zeros(3), cov=cov)  # <- here


@pytest.mark.parametrize("cov", [SPD, np.triu(SPD + 5.0) + np.tril(SPD, -1)], ids=["symmetric", "lower read"])
def test_multivariate_normal_in_cov(cov):
    inputs = {"x": rng.normal(size=(4, 3)), "cov": cov}
    if kind_of(np.linalg.slogdet) == kind_of(np.linalg.solve) == "differentiable":
        check_against_numerics(mvn_traced_cov, inputs, ["x", "cov"], rtol=1e-5)
    else:
        refused(mvn_traced_cov, inputs, ["x", "cov"], "scipy.stats.multivariate_normal.logpdf (a traced cov")


def mvn_singular(x):
    return multivariate_normal.logpdf(x, cov=SPD, allow_singular=True)  # <- here


def test_multivariate_normal_allow_singular_is_refused():
    refused(mvn_singular, {"x": np.zeros(3)}, ["x"], "scipy.stats.multivariate_normal.logpdf (allow_singular")


def mvn_covariance_object(x):
    return multivariate_normal.logpdf(x, cov=st.Covariance.from_diagonal([1.0, 2.0, 3.0]))  # <- here


@pytest.mark.skipif(not hasattr(st, "Covariance"), reason="scipy.stats.Covariance: scipy >= 1.10")
def test_multivariate_normal_with_a_covariance_object_is_refused():
    t = refused(mvn_covariance_object, {"x": np.ones(3)}, ["x"],
                "scipy.stats.multivariate_normal.logpdf (a Covariance object")
    np.testing.assert_allclose(t.value, mvn_covariance_object(np.ones(3)))


# --- substitution: scoped to the trace ----------------------------------------------------------------
def _assert_restored():
    for name, f in ORIGINALS.items():
        assert getattr(sc, name) is f
    assert logsumexp is ORIGINALS["logsumexp"] and softmax is ORIGINALS["softmax"]
    assert not {"logpdf", "pdf", "cdf", "logcdf"} & set(vars(NORM_CLASS))  # rv_continuous's again
    assert all(vars(MVN_CLASS)[k] is f for k, f in MVN_METHODS.items())


def test_names_are_substituted_during_the_trace_and_restored_after():
    seen = {}

    def f(a):
        seen["module"], seen["global"] = sc.logsumexp, logsumexp
        seen["norm"] = "logpdf" in vars(NORM_CLASS)
        return logsumexp(a)

    trace(f, {"a": A}, ["a"])
    assert seen["module"] is not ORIGINALS["logsumexp"] and seen["global"] is seen["module"]
    assert seen["norm"] and seen["module"].__wrapped__ is ORIGINALS["logsumexp"]
    _assert_restored()
    np.testing.assert_allclose(seen["module"](A), ORIGINALS["logsumexp"](A))  # plain calls: scipy's own
    assert kind_of(sc.logsumexp) == kind_of(st.norm.logpdf) == kind_of(sc.expit) == "differentiable"


def test_names_are_restored_after_an_exception():
    def f(a):
        sc.softmax(a)
        raise KeyError("in the user's code")

    with pytest.raises(KeyError):
        trace(f, {"a": A}, ["a"])
    _assert_restored()


def test_a_nested_trace_keeps_the_substitution_until_the_outer_one_ends():
    def inner(a):
        return sc.logsumexp(a)

    def outer(a):
        t = trace(inner, {"a": np.ones(3)}, ["a"])
        assert t.ok, t.problems
        return sc.logsumexp(a)

    t = trace(outer, {"a": A}, ["a"])
    assert t.ok, t.problems
    _assert_restored()


def test_gradcli_does_not_import_scipy_and_works_without_it():
    code = "\n".join([
        "import sys, numpy as np",
        "import gradcli.trace as gt",
        "assert 'scipy' not in sys.modules",
        "sys.modules['scipy'] = None  # scipy absent: importing it raises ImportError",
        "assert gt.trace(lambda x: np.sum(np.exp(x)), {'x': np.ones(3)}, ['x']).ok",
        "del sys.modules['scipy']",
        "import scipy.special  # imported by the model after gradcli: routed from the next trace on",
        "f = lambda x: scipy.special.logsumexp(scipy.special.expit(x))",
        "assert gt.trace(f, {'x': np.ones(3)}, ['x']).ok",
    ])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


# --- ML losses ----------------------------------------------------------------------------------------
X = rng.normal(size=(8, 3))
Y = X @ np.array([0.5, -1.0, 2.0]) + 0.3 * rng.normal(size=8)
LABELS = rng.integers(0, 4, size=8)


def gaussian_nll(w, s):
    return -np.sum(norm.logpdf(Y, loc=X @ w, scale=s))


def test_gaussian_regression_loss():
    w, s = np.array([0.4, -0.8, 1.5]), np.array(0.7)
    t = check_against_numerics(gaussian_nll, {"w": w, "s": s}, ["w", "s"])
    r = Y - X @ w
    g = t.gradient()
    np.testing.assert_allclose(g["w"], -X.T @ r / s**2, rtol=1e-12)
    np.testing.assert_allclose(g["s"], len(Y) / s - np.sum(r * r) / s**3, rtol=1e-12)


def xent_logsumexp(W):
    logits = X @ W
    return np.mean(logsumexp(logits, axis=1) - logits[np.arange(len(LABELS)), LABELS])


def xent_log_softmax(W):
    logp = sc.log_softmax(X @ W, axis=1)
    return -np.mean(np.take_along_axis(logp, LABELS[:, None], axis=1))


@pytest.mark.parametrize("loss", [xent_logsumexp, xent_log_softmax], ids=lambda f: f.__name__)
def test_cross_entropy(loss):
    W = rng.normal(size=(3, 4))
    t = check_against_numerics(loss, {"W": W}, ["W"])
    onehot = np.eye(4)[LABELS]
    want = X.T @ (sc.softmax(X @ W, axis=1) - onehot) / len(LABELS)
    np.testing.assert_allclose(t.gradient()["W"], want, rtol=1e-12, atol=1e-15)


def test_multivariate_normal_entropy_in_the_covariance():
    # (dim * log(2 pi e) + log det cov) / 2: against central differences, matrix and diagonal covariances
    A = np.array([[2.0, 0.3], [0.3, 1.0]])
    check_against_numerics(lambda c: st.multivariate_normal.entropy(mean=np.zeros(2), cov=c), {"c": A}, ["c"])
    check_against_numerics(lambda c: st.multivariate_normal.entropy(mean=np.zeros(2), cov=c),
                           {"c": np.array([1.5, 2.0])}, ["c"])
