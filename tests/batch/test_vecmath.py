"""The numba engine's vectorised exp, log, sin/cos, tanh, cosh and sigmoid against mpmath and numpy."""
import math

import numpy as np
import pytest

pytest.importorskip("numba")
mpmath = pytest.importorskip("mpmath")  # sympy's own dependency

from gradcli.engines import vecmath  # noqa: E402

mpmath.mp.prec = 120

EXACT = {
    "exp": mpmath.exp, "log": mpmath.log, "sin": mpmath.sin, "cos": mpmath.cos, "tanh": mpmath.tanh,
    "cosh": mpmath.cosh, "sigmoid": lambda t: 1 / (1 + mpmath.exp(-t)),
}


def numpy_sigmoid(x):
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z))


NUMPY = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "cosh": np.cosh,
         "sigmoid": numpy_sigmoid}


def call(name, x, o=None):
    n = x.shape[0]
    o = np.empty_like(x) if o is None else o
    w = np.empty((3, max(n, 1)))
    getattr(vecmath, name)(x, o, n, w, w.view(np.int64))
    return o


def samples(name, rng):
    wide = {
        "exp": [rng.uniform(-1, 1, 600), rng.uniform(-708, 708, 600), rng.standard_normal(200) * 1e-9],
        "log": [rng.uniform(0, 3, 600), np.exp(rng.uniform(-700, 700, 600)), 1 + rng.standard_normal(200) * 1e-7],
        "sin": [rng.uniform(-4, 4, 600), rng.uniform(-1e5, 1e5, 600), np.arange(1, 200) * np.pi],
        "cos": [rng.uniform(-4, 4, 600), rng.uniform(-1e5, 1e5, 600), (np.arange(1, 200) + 0.5) * np.pi],
        "tanh": [rng.uniform(-3, 3, 600), rng.standard_normal(200) * 1e-6, rng.uniform(-25, 25, 400)],
        "cosh": [rng.uniform(-3, 3, 600), rng.uniform(-708, 708, 400)],
        "sigmoid": [rng.uniform(-40, 40, 600), rng.uniform(-700, 700, 400)],
    }[name]
    return np.concatenate(wide)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_within_two_ulp_of_the_exact_value(name):
    x = samples(name, np.random.default_rng(sorted(EXACT).index(name)))
    got = call(name, x)
    exact = np.array([float(EXACT[name](mpmath.mpf(float(v)))) for v in x])
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact))
    assert ulps.max() <= 2.0, (name, x[np.argmax(ulps)], ulps.max())
    assert ulps.mean() < 0.6  # mostly correctly rounded, not just bounded


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, -1e-310, 2.2250738585072014e-308,
                    707.9, 708.0, 709.7, 709.9, 710.5, -708.0, -709.9, -745.1, -746.0, 1e5, -1e5, 1e5 + 0.5,
                    1e300, -1e300, 1.0, -1.0, 2.0, 0.5, 1.4142135623730951, 1.4142135623730954, 19.1, -19.1, 400.0])


@pytest.mark.parametrize("name", sorted(EXACT))
def test_special_values_are_numpys(name):
    with np.errstate(all="ignore"):
        want = NUMPY[name](SPECIAL)
    got = call(name, SPECIAL.copy())
    same_nan = np.isnan(got) == np.isnan(want)
    assert same_nan.all(), SPECIAL[~same_nan]
    fin = ~np.isnan(want)
    np.testing.assert_array_equal(np.isinf(got[fin]), np.isinf(want[fin]))
    np.testing.assert_array_equal(np.signbit(got[fin]), np.signbit(want[fin]))
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf
        ok = (got[fin] == want[fin]) | (np.abs(got[fin] - want[fin]) <= 2 * np.spacing(np.abs(want[fin])))
    assert ok.all(), (SPECIAL[fin][~ok], got[fin][~ok], want[fin][~ok])


@pytest.mark.parametrize("name", sorted(EXACT))
def test_in_place_float32_and_partial_length(name):
    x = samples(name, np.random.default_rng(7))[:300]
    want = call(name, x)
    inplace = x.copy()
    call(name, inplace, inplace)  # the program reuses registers: o may be x
    np.testing.assert_array_equal(inplace, want)
    x32 = x.astype(np.float32)
    got32 = call(name, x32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got32, call(name, x32.astype(np.float64)).astype(np.float32))
    part = np.full(300, -7.0)
    o = part.copy()
    n = 100
    w = np.empty((3, 300))
    getattr(vecmath, name)(x, o, n, w, w.view(np.int64))
    np.testing.assert_array_equal(o[:n], want[:n])
    assert (o[n:] == -7.0).all()


def test_sincos_is_sin_and_cos():
    x = samples("sin", np.random.default_rng(3))
    s, c = np.empty_like(x), np.empty_like(x)
    vecmath.sincos(x, s, c, x.shape[0], np.empty((3, x.shape[0])))
    np.testing.assert_array_equal(s, call("sin", x))
    np.testing.assert_array_equal(c, call("cos", x))


def test_exp_and_log_are_inverse_to_an_ulp():
    x = np.exp(np.random.default_rng(5).uniform(-50, 50, 1000))
    y = call("exp", call("log", x))
    assert np.max(np.abs(y - x) / x) < 40 * 2.0**-52  # log's rounding, amplified by |log x| <= 50
    assert math.isclose(call("log", np.array([math.e]))[0], 1.0, rel_tol=2.3e-16)
