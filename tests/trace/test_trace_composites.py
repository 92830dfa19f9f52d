"""Compositions (gradcli.trace.composites): numpy's functions against central differences, with options."""
from __future__ import annotations

import numpy as np
import pytest

from gradcli.trace import trace
from gradcli.trace.routing import kind_of
from tests.trace.trace_helpers import check_against_numerics, check_transpose

RNG = np.random.default_rng(7)
A = RNG.normal(size=(3, 4))
B = RNG.normal(size=(2, 3, 5))
W = RNG.uniform(0.5, 2.0, size=(3, 4))
V = RNG.normal(size=7)
NANS = A.copy()
NANS[0, 1] = NANS[2, 3] = np.nan


def refused(fn, inputs, wrt, call):
    t = trace(fn, inputs, wrt)
    assert not t.ok
    assert any(p.startswith(call) for p in t.problems), t.problems
    return t


def test_all_are_routed():
    for f in (np.average, np.ptp, np.median, np.percentile, np.quantile, np.nanmax, np.nanmin, np.nanstd,
              np.nanvar, np.nanprod, np.nancumsum, np.nancumprod, np.meshgrid, np.polyval, np.interp,
              np.vander, np.ediff1d, np.ldexp, np.frexp, np.unwrap, np.corrcoef, np.cov):
        assert kind_of(f) == "differentiable", f


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 1)}])
def test_average_unweighted(kw):
    check_against_numerics(lambda a: np.average(a, **kw), {"a": A}, ["a"])


@pytest.mark.parametrize("axis, w", [(None, W), (1, W), (0, W[:, 0]), (1, W[0])])
def test_average_weighted_both_traced(axis, w):
    check_against_numerics(lambda a, w: np.average(a, axis=axis, weights=w), {"a": A, "w": w}, ["a", "w"])


def test_average_returned():
    check_against_numerics(lambda a, w: np.average(a, axis=1, weights=w, returned=True)[0],
                           {"a": A, "w": W[0]}, ["a", "w"])
    check_against_numerics(lambda a, w: np.average(a, axis=1, weights=w, returned=True)[1],
                           {"a": A, "w": W[0]}, ["w"])
    check_against_numerics(lambda a: np.average(a, axis=0, weights=W[:, 0], returned=True)[0] * 2,
                           {"a": A}, ["a"])
    t = trace(lambda a: np.average(a, axis=0, returned=True)[1] * a[0], {"a": A}, ["a"])
    assert t.ok and np.allclose(t.value, 3 * A[0])


@pytest.mark.parametrize("kw", [{}, {"axis": 1}, {"axis": 0, "keepdims": True}])
def test_ptp(kw):
    check_against_numerics(lambda a: np.ptp(a, **kw), {"a": A}, ["a"])


@pytest.mark.parametrize("x, kw", [(A, {}), (A, {"axis": 1}), (A, {"axis": 0, "keepdims": True}),
                                   (B, {"axis": (0, 2)}), (B, {"axis": -1, "keepdims": True}), (V, {}),
                                   (np.array(2.5), {}), (A[:1], {"axis": 0})])
def test_median(x, kw):
    check_against_numerics(lambda a: np.median(a, **kw), {"a": x}, ["a"])


def test_median_tie_shares_like_max():
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0])  # the middle value 2 is held twice
    t = trace(lambda a: np.median(a), {"a": x}, ["a"])
    assert t.ok
    np.testing.assert_allclose(t.vjp(np.array(1.0))["a"], [0, 0, 0.5, 0.5, 0])


@pytest.mark.parametrize("q, kw", [(0.3, {}), ([0.1, 0.5, 1.0], {"axis": 1}), (np.array([[0.0, 0.25]]), {"axis": 0}),
                                   (0.7, {"axis": 1, "keepdims": True}), (0.4, {"method": "lower"}),
                                   (0.4, {"method": "higher", "axis": 0})])
def test_quantile_and_percentile(q, kw):
    check_against_numerics(lambda a: np.quantile(a, q, **kw), {"a": A}, ["a"])
    check_against_numerics(lambda a: np.percentile(a, np.multiply(q, 100), **kw), {"a": A}, ["a"])


def test_quantile_refusals():
    refused(lambda a: np.quantile(a, 0.3, method="nearest"), {"a": A}, ["a"], "np.quantile (method='nearest')")
    refused(lambda a, q: np.quantile(a, q), {"a": A, "q": np.array(0.3)}, ["a", "q"], "np.quantile (traced q)")
    refused(lambda a: np.median(a), {"a": NANS}, ["a"], "np.median (NaN input)")


@pytest.mark.parametrize("func", [np.nanmax, np.nanmin, np.nanprod])
@pytest.mark.parametrize("kw", [{}, {"axis": 1}, {"axis": 0, "keepdims": True}])
def test_nan_reductions(func, kw):
    check_against_numerics(lambda a: func(a, **kw), {"a": NANS}, ["a"])


def test_nan_extremum_all_nan_refused():
    x = NANS.copy()
    x[:, 1] = np.nan
    with pytest.warns(RuntimeWarning):
        refused(lambda a: np.nanmax(a, axis=0), {"a": x}, ["a"], "np.nanmax (an all-NaN slice)")


@pytest.mark.parametrize("func", [np.nanvar, np.nanstd])
@pytest.mark.parametrize("kw", [{}, {"axis": 1, "ddof": 1}, {"axis": 0, "keepdims": True}])
def test_nan_moments(func, kw):
    check_against_numerics(lambda a: func(a, **kw), {"a": NANS}, ["a"])
    check_against_numerics(lambda a: func(a, **kw), {"a": A}, ["a"])


def test_nan_moments_refusals():
    with pytest.warns(RuntimeWarning):
        refused(lambda a: np.nanvar(a, axis=0, ddof=3), {"a": NANS}, ["a"], "np.nanvar (no degrees")
    refused(lambda a: np.nanstd(a, where=np.ones(A.shape, bool)), {"a": A}, ["a"], "np.nanstd (where=)")


@pytest.mark.parametrize("func", [np.nancumsum, np.nancumprod])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nan_accumulations(func, axis):
    check_against_numerics(lambda a: func(a, axis=axis), {"a": NANS}, ["a"])


@pytest.mark.parametrize("kw", [{}, {"indexing": "ij"}, {"sparse": True}, {"indexing": "ij", "sparse": True}])
def test_meshgrid(kw):
    x, y, z = RNG.normal(size=3), RNG.normal(size=4), RNG.normal(size=2)
    for k in range(3):
        check_against_numerics(lambda x, y, z: np.meshgrid(x, y, z, **kw)[k], {"x": x, "y": y, "z": z},
                               ["x", "y", "z"])
    check_against_numerics(lambda x: np.meshgrid(x, y, **kw)[0] * np.meshgrid(x, y, **kw)[1], {"x": x}, ["x"])


def test_polyval():
    p = np.array([0.5, -1.0, 2.0, 3.0])
    check_against_numerics(lambda p, x: np.polyval(p, x), {"p": p, "x": A}, ["p", "x"])
    check_against_numerics(lambda p: np.polyval(p, 1.5), {"p": p}, ["p"])
    check_against_numerics(lambda x: np.polyval([2.0], x), {"x": V}, ["x"])


XP = np.array([-1.0, 0.0, 0.5, 2.0])
FP = np.array([1.0, -2.0, 0.5, 3.0])
XI = np.array([-1.7, -0.3, 0.2, 0.9, 1.9, 2.4])


@pytest.mark.parametrize("kw", [{}, {"left": -5.0, "right": 7.0}, {"period": 2.5}])
def test_interp(kw):
    check_against_numerics(lambda x, fp: np.interp(x, XP, fp, **kw), {"x": XI, "fp": FP}, ["x", "fp"])
    check_against_numerics(lambda fp: np.interp(0.3, XP, fp, **kw), {"fp": FP}, ["fp"])


def test_interp_knots_follow_numpys_segment():
    x = np.array([0.0, 0.5, 2.0])  # knots: the value from the segment to the right, the last at xp[-1]
    t = trace(lambda x: np.interp(x, XP, FP), {"x": x}, ["x"])
    assert t.ok
    slopes = np.diff(FP) / np.diff(XP)
    np.testing.assert_allclose(t.jvp({"x": np.ones(3)}), [slopes[1], slopes[2], slopes[2]])
    np.testing.assert_allclose(t.value, np.interp(x, XP, FP))
    check_transpose(lambda x, fp: np.interp(x, XP, fp), {"x": x, "fp": FP}, ["x", "fp"])


def test_interp_refusals():
    refused(lambda x, p: np.interp(x, XP, FP, period=p), {"x": XI, "p": np.array(7.0)}, ["x", "p"],
            "np.interp (traced period")
    refused(lambda x: np.interp(x, XP[::-1], FP), {"x": XI}, ["x"], "np.interp (xp not strictly increasing)")


@pytest.mark.parametrize("kw", [{}, {"N": 2}, {"N": 5, "increasing": True}])
def test_vander(kw):
    check_against_numerics(lambda x: np.vander(x, **kw), {"x": np.array([0.0, 1.5, -2.0, 0.3])}, ["x"])
    t = trace(lambda x: np.vander(x, 1) * x[:, None], {"x": V}, ["x"])
    assert t.ok


def test_ediff1d():
    check_against_numerics(lambda a: np.ediff1d(a), {"a": A}, ["a"])
    check_against_numerics(lambda a, b: np.ediff1d(a, to_begin=b, to_end=[1.0, 2.0]), {"a": V, "b": V[:2]},
                           ["a", "b"])


def test_ldexp_and_frexp():
    x = np.array([0.3, -5.0, 17.0, 0.0, 1e-3])
    check_against_numerics(lambda x: np.ldexp(x, np.array([1, -2, 3, 0, 5])), {"x": x}, ["x"])
    check_against_numerics(lambda x: np.frexp(x)[0], {"x": x[x != 0]}, ["x"])
    t = trace(lambda x: np.frexp(x)[1] * x, {"x": x}, ["x"])
    assert t.ok and np.allclose(t.vjp(np.ones(5))["x"], np.frexp(x)[1])


@pytest.mark.parametrize("kw", [{}, {"dx": 0.3}, {"axis": 0}, {"x": np.array([0.0, 0.4, 1.5, 1.6])},
                                {"x": np.cumsum(W, axis=1), "axis": 1}])
def test_trapezoid(kw):
    f = getattr(np, "trapezoid", None) or np.trapz
    check_against_numerics(lambda y: f(y, **kw), {"y": A}, ["y"])


def test_trapezoid_traced_x():
    f = getattr(np, "trapezoid", None) or np.trapz
    check_against_numerics(lambda y, x: f(y, x), {"y": V, "x": np.cumsum(np.abs(V))}, ["y", "x"])


def test_unwrap():
    p = np.cumsum(RNG.uniform(0.5, 2.5, size=(2, 8)), axis=1) % (2 * np.pi)
    check_against_numerics(lambda p: np.unwrap(p), {"p": p}, ["p"])
    check_against_numerics(lambda p: np.unwrap(p, axis=0, period=4.0), {"p": p.T}, ["p"])


@pytest.mark.parametrize("kw", [{}, {"rowvar": False}, {"bias": True}, {"ddof": 2},
                                {"fweights": np.array([1, 2, 1, 3])}, {"aweights": np.array([0.5, 1.0, 2.0, 1.5])},
                                {"aweights": np.array([0.5, 1.0, 2.0, 1.5]), "fweights": np.array([1, 2, 1, 3])}])
def test_cov(kw):
    x = A.T if kw.get("rowvar") is False else A
    check_against_numerics(lambda m: np.cov(m, **kw), {"m": x}, ["m"])


def test_cov_and_corrcoef_shapes():
    check_against_numerics(lambda m, y: np.cov(m, y), {"m": V[:4], "y": A[0]}, ["m", "y"])
    check_against_numerics(lambda m: np.cov(m), {"m": V}, ["m"])  # one variable: a 0-d variance
    check_against_numerics(lambda m, y: np.corrcoef(m, y), {"m": A, "y": W[0]}, ["m", "y"])
    check_against_numerics(lambda m: np.corrcoef(m, rowvar=False), {"m": A.T}, ["m"])
    with pytest.warns(RuntimeWarning):
        refused(lambda m: np.cov(m, ddof=4), {"m": A}, ["m"], "np.cov (no degrees")


def test_complex_refused():
    refused(lambda a: np.median(a * 1j), {"a": A}, ["a"], "np.median (complex input)")


def test_degenerate_inputs_refused():
    with pytest.warns(RuntimeWarning):
        refused(lambda a: np.median(a, axis=0), {"a": np.zeros((0, 3))}, ["a"], "np.median (an empty slice)")
    x = A.copy()
    x[1] = 2.0
    with pytest.warns(RuntimeWarning):
        refused(lambda a: np.corrcoef(a), {"a": x}, ["a"], "np.corrcoef (a constant variable")


def test_single_precision_follows_numpys_dtype():
    for f in (lambda a: np.cov(a.astype(np.float32)), lambda a: np.quantile(a.astype(np.float32), 0.3, axis=1),
              lambda a: np.nanmax(a.astype(np.float32), axis=0)):
        t32, t64 = trace(f, {"a": A}, ["a"]), trace(lambda a: f(a).astype(float), {"a": A}, ["a"])
        assert t32.ok and t32.value.dtype == f(A).dtype
        u = {"a": RNG.normal(size=A.shape)}
        np.testing.assert_allclose(t32.jvp(u), t64.jvp(u), rtol=1e-5)
