"""AD whose intermediate products leave float64's range: recomputed wider where float64 lost them.

References are closed-form derivatives evaluated by mpmath at 30 digits; every case here gave a confident wrong number (0, or
an inaccurate one with 4 correct digits) or "undefined" before.
"""
import json

import mpmath
import numpy as np
import pytest
from click.testing import CliRunner

import gradcli
from gradcli.cli import main
from gradcli.core.parser import parse
from gradcli.methods import extended_range, forward, hessian, reverse

pytestmark = pytest.mark.skipif(extended_range.EXTENDED is None,
                                reason="this platform's long double is float64: nothing wider to recompute in")

mpmath.mp.dps = 30


def _exact(df, x):
    return float(df(mpmath.mpf(x)))


CASES = {
    # d(1/y)/dy = -1/y**2 underflows (3.7e-348) on the way to 1.9e-174
    "sigmoid at -400": ("1/(1+exp(-x))", -400.0, lambda x: mpmath.exp(-x) / (1 + mpmath.exp(-x)) ** 2),
    # d(1/z)/dz = -1e320 overflows on the way to -1
    "atan(1/z) at 1e-160": ("atan(1/z)", 1e-160, lambda z: -1 / (1 + z ** 2)),
    # a subnormal intermediate keeps 4 of 16 digits of a normal result
    "subnormal on the way": ("x*exp(-740)*exp(700)", 1.5, lambda x: mpmath.exp(-40)),
    # exp(800) overflows, inf * exp(-800) * x = nan, where the derivative of the product (x) is 1
    "overflow then back": ("exp(x)*exp(-x)*x", 800.0, lambda x: mpmath.mpf(1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", [forward, reverse])
def test_ad_matches_mpmath_where_float64_lost_the_range(case, mode):
    text, x, f = CASES[case]
    graph = parse(text)
    (name,) = graph.variables
    J = mode.jacobian(graph, {name: x})[1]
    assert J.dtype == np.float64
    assert J[0, 0] == pytest.approx(_exact(f, x), rel=1e-14, abs=0.0)


@pytest.mark.parametrize("text, point, expected", [
    ("x - x", {"x": 1e300}, 0.0),  # an exact zero stays an exact zero
    ("0*x + y", {"x": 2.0, "y": 1e-320}, 0.0),
    ("x*y", {"x": 1e-200, "y": 1e-200}, 1e-200),
])
def test_exact_zeros_and_ordinary_entries_are_unchanged(text, point, expected):
    graph = parse(text)
    for mode in (forward, reverse):
        J = mode.jacobian(graph, point)[1]
        assert J[0, 0] == expected


def test_a_pole_stays_undefined():
    result = CliRunner().invoke(main, ["grad", "1/x", "--at", "x=0", "--json"])
    assert result.exit_code == 3, result.output
    assert json.loads(result.output)["status"] == "undefined"


@pytest.mark.parametrize("case", ["sigmoid at -400", "atan(1/z) at 1e-160"])
def test_forward_and_reverse_alone_no_longer_agree_on_a_wrong_number(case):
    text, x, f = CASES[case]
    name = parse(text).variables[0]
    result = CliRunner().invoke(main, ["grad", text, "--at", f"{name}={x!r}", "-m", "forward,reverse", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    exact = _exact(f, x)
    for method in ("forward", "reverse"):
        assert doc["methods"][method]["gradient"][name] == pytest.approx(exact, rel=1e-13, abs=0.0)


def test_the_default_methods_agree_at_the_underflowing_sigmoid():
    result = CliRunner().invoke(main, ["grad", "1/(1+exp(-x))", "--at", "x=-400"])
    assert result.exit_code == 0, result.output
    assert "agree" in result.output


def test_batch_writes_the_derivative_not_zero(tmp_path):
    out = tmp_path / "o.csv"
    report = gradcli.grad_batch("1/(1+exp(-x))", n=16, domain="x=-402:-398", out=str(out))
    assert report.status == "agree"
    rows = np.loadtxt(out, delimiter=",", skiprows=1)
    f = CASES["sigmoid at -400"][2]
    for x, _, d in rows:
        assert d == pytest.approx(_exact(f, x), rel=1e-12, abs=0.0)


# --- the Hessian's AD routes: second partials that leave float64's range on the way -----------------

HESSIAN_CASES = {
    # -1/y**2 = -1e-320 (subnormal, 5 digits left) on the way to an ordinary -2e-160
    "log(1+z**2) at 1e80": ("log(1+z**2)", {"z": 1e80},
                            lambda z: [[2 * (1 - z ** 2) / (1 + z ** 2) ** 2]]),
    # -1/y**2 underflows to 0 (3.7e-348) on the way to 1.9e-174
    "sigmoid at -400": ("1/(1+exp(-x))", {"x": -400.0},
                        lambda x: [[mpmath.diff(lambda t: 1 / (1 + mpmath.exp(-t)), x, 2)]]),
    # exp(800) overflows, inf * exp(-800) = nan, where the second derivative of the product (x**2) is 2
    "overflow then back": ("exp(x)*exp(-x)*x**2", {"x": 800.0}, lambda x: [[2]]),
    # a subnormal intermediate in an off-diagonal entry of two variables
    "subnormal on the way": ("x*exp(y-740)*exp(700)", {"x": 1.5, "y": 0.0},
                             lambda x, y: [[0, mpmath.exp(y - 40)], [mpmath.exp(y - 40), x * mpmath.exp(y - 40)]]),
    # a subexpression of constants alone that is subnormal (4 digits left) in float64
    "subnormal constant": ("x*y*exp(-740)*exp(700)", {"x": 1.5, "y": 2.0},
                           lambda x, y: [[0, mpmath.exp(-40)], [mpmath.exp(-40), 0]]),
}

_ROUTES = {
    "forward_over_reverse": lambda g, p: hessian.forward_over_reverse(g, p).hessian,
    "reverse_over_forward": lambda g, p: hessian.reverse_over_forward(g, p).hessian,
    "forward_over_forward": hessian.forward_over_forward,
}


@pytest.mark.parametrize("case", sorted(HESSIAN_CASES))
@pytest.mark.parametrize("route", sorted(_ROUTES))
def test_hessian_routes_match_mpmath_where_float64_lost_the_range(case, route):
    text, point, f = HESSIAN_CASES[case]
    graph = parse(text)
    H = _ROUTES[route](graph, point)
    assert H.dtype == np.float64
    exact = f(*[mpmath.mpf(point[v]) for v in graph.variables])
    for i, row in enumerate(exact):
        for k, e in enumerate(row):
            assert H[i, k] == pytest.approx(float(e), rel=1e-14, abs=0.0)


def test_hessian_gradient_and_hvp_are_redone_too():
    graph = parse("1/(1+exp(-x))")
    res = hessian.forward_over_reverse(graph, {"x": -400.0}, tangents=np.array([2.0]))
    sigmoid = lambda t: 1 / (1 + mpmath.exp(-t))
    assert res.gradient[0] == pytest.approx(float(mpmath.diff(sigmoid, -400)), rel=1e-14, abs=0.0)
    assert res.hessian[0] == pytest.approx(2 * float(mpmath.diff(sigmoid, -400, 2)), rel=1e-14, abs=0.0)


@pytest.mark.parametrize("text, point", [("x - x", {"x": 1e300}), ("x*x - x*x", {"x": 1e200}),
                                         ("0*x*y + y", {"x": 2.0, "y": 1e-320})])
def test_hessian_exact_zeros_stay_zero(text, point):
    graph = parse(text)
    for route in _ROUTES.values():
        assert not np.asarray(route(graph, point)).any()


def test_hessian_command_agrees_at_log_of_a_huge_square():
    result = CliRunner().invoke(main, ["hessian", "log(1+z**2)", "--at", "z=1e80", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["status"] == "agree"


def test_a_second_partial_beyond_float64s_range_is_no_missing_second_derivative():
    # d²(1/z)/dz² = 2e480 at z = 1e-160: finite, only out of float64's range. The Hessian of atan(1/z)
    # there, 2e-160, exists; AD of the program cancels +-2e160 to get it, so it is ill_conditioned
    # (the exact value shown), never undefined
    result = CliRunner().invoke(main, ["hessian", "atan(1/z)", "--at", "z=1e-160", "--json"])
    doc = json.loads(result.output)
    assert doc["status"] == "ill_conditioned" and result.exit_code == 3, doc["status"]
    # the pole of x**1.5's second derivative at 0 is still one
    result = CliRunner().invoke(main, ["hessian", "x**1.5", "--at", "x=0", "--json"])
    assert json.loads(result.output)["status"] == "undefined"
