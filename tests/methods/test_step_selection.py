"""The one step selection of central differences (a first pass, the full search where it is unsure) and
Ridders' tableau that stops per point: the same estimates at a point and in a batch, estimates that bound
the actual error against closed forms, and the first pass kept only where it can vouch for its number."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from gradcli.api import grad as gradcli_grad
from gradcli.batch import methods as bm
from gradcli.core.constants import CENTRAL_CANDIDATES
from gradcli.core.parser import parse
from gradcli.core.constants import RIDDERS_ROWS
from gradcli.methods import differences, numeric, tableau

FIRST = [0, CENTRAL_CANDIDATES - 1]
EPS = np.finfo(np.float64).eps


def tried(result, k=0):
    """The candidates the step selection tried for variable k."""
    return [j for j in range(CENTRAL_CANDIDATES) if np.isfinite(result.detail["candidate_steps"][j, k])]


@pytest.mark.parametrize("expr, point", [
    ("sin(x)*exp(y)", {"x": 0.3, "y": 0.7}), ("sin(x)/x", {"x": 1.7}), ("x**2.5", {"x": 0.3}),
    ("log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2)", {"x": -1.2, "y": 0.4}), ("atan(x)", {"x": 30.0}),
])
def test_where_the_first_pass_settles_the_full_search_picks_the_same_step(expr, point, monkeypatch):
    g = parse(expr)
    r = numeric.central(g, point)
    assert all(tried(r, k) == FIRST for k in range(len(g.variables)))
    monkeypatch.setattr(differences, "FIRST_PASS", tuple(range(CENTRAL_CANDIDATES)))
    full = numeric.central(g, point)
    assert np.array_equal(full.jacobian, r.jacobian) and np.array_equal(full.steps, r.steps)
    np.testing.assert_allclose(r.error, full.error, rtol=1e-12)


def test_the_first_pass_estimate_bounds_the_error():
    r = numeric.central(parse("sin(x)*exp(y)"), {"x": 0.3, "y": 0.7})
    exact = [math.cos(0.3) * math.exp(0.7), math.sin(0.3) * math.exp(0.7)]
    assert tried(r, 0) == FIRST and tried(r, 1) == FIRST
    assert np.all(np.abs(r.jacobian[0] - exact) <= r.error[0])


def test_a_short_length_scale_gets_the_full_search_and_a_better_step():
    g = parse("exp(100*x)")
    r = numeric.central(g, {"x": 0.01})
    exact = float(100 * mpmath.exp(1))
    assert tried(r) == list(range(CENTRAL_CANDIDATES))
    assert abs(r.jacobian[0, 0] - exact) <= r.error[0, 0] <= 1e-8 * exact
    # the natural step alone would have been a hundred times worse than what the search found
    first = r.detail["candidate_errors"][0, 0, 0]
    assert first > 100 * r.error[0, 0]


def test_the_smallest_step_cross_checks_the_natural_one_without_the_kink_test(monkeypatch):
    # without the kink test (large graphs skip it), only the first pass's second candidate sees that the
    # kink is 1e-160 away: every step above that straddles it and reads a converged slope of 1, not 2
    monkeypatch.setattr(numeric, "STRADDLE_BUDGET", 0)
    r = numeric.central(parse("x + abs(x - 1e-160)"), {"x": 2e-160})
    assert tried(r) == list(range(CENTRAL_CANDIDATES))
    assert abs(r.jacobian[0, 0] - 2.0) <= r.error[0, 0] < 1e-2


@pytest.mark.parametrize("expr, domain", [
    ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", (-1, 1)),
    ("log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2", (-2, 2)),
    ("x**3*y - sin(50*x) + exp(8*y)", (-1, 1)),
    ("atan2(y, x) + hypot(x, y)", (0.5, 3)),
])
def test_a_batch_gives_the_estimates_one_point_gives(expr, domain):
    g = parse(expr)
    rng = np.random.default_rng(5)
    pts = {v: rng.uniform(*domain, 40) for v in g.variables}
    Jc, Ec, steps = bm.central(g, pts, np, np.float64)
    Jr, Er = bm.richardson(g, pts, np, np.float64, (Jc, Ec, steps))
    for i in range(40):
        point = {v: float(pts[v][i]) for v in g.variables}
        c, r = numeric.central(g, point), numeric.richardson(g, point)
        # the same algorithm on the same numbers: equal up to the last bits that numpy's vector loops may
        # round differently for a batch than for one point
        np.testing.assert_allclose(Jc[..., i], c.jacobian, rtol=0, atol=1e-3 * float(np.max(c.error)) + 1e-15)
        np.testing.assert_allclose(Ec[..., i], c.error, rtol=1e-3)
        np.testing.assert_allclose(Jr[..., i], r.jacobian, rtol=0, atol=1e-3 * float(np.max(r.error)) + 1e-15)
        np.testing.assert_allclose(Er[..., i], r.error, rtol=1e-3)


def test_the_batch_estimates_bound_the_actual_errors():
    g = parse("x**3*y - sin(50*x) + exp(8*y)")
    rng = np.random.default_rng(7)
    x, y = rng.uniform(-1, 1, 2000), rng.uniform(-1, 1, 2000)
    exact = np.stack([3 * x**2 * y - 50 * np.cos(50 * x), x**3 + 8 * np.exp(8 * y)])[None]
    Jc, Ec, steps = bm.central(g, {"x": x, "y": y}, np, np.float64)
    Jr, Er = bm.richardson(g, {"x": x, "y": y}, np, np.float64, (Jc, Ec, steps))
    # the closed form's own rounding (a few ulp of its terms) is allowed beside the estimates
    slack = 8 * EPS * np.stack([np.abs(3 * x**2 * y) + 50, np.abs(x**3) + 8 * np.exp(8 * y)])[None]
    assert np.all(np.abs(Jc - exact) <= Ec + slack)
    assert np.all(np.abs(Jr - exact) <= Er + slack)


def _rows_of(f, x, h0):
    hs = [h0 / 2.0 ** k for k in range(RIDDERS_ROWS)]
    return lambda i, idx=None: (f(x + hs[i]) - f(x - hs[i])) / (2 * hs[i]) if idx is None else \
        (f(x[..., idx] + hs[i]) - f(x[..., idx] - hs[i])) / (2 * hs[i])


def test_ridders_gathering_the_unsure_points_changes_no_bit():
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (2, 500))
    f = lambda t: np.sin(7 * t) * np.exp(t)
    whole, gathered = {}, {}
    a = tableau.ridders(_rows_of(f, x, 0.25), RIDDERS_ROWS, x.shape, trace=whole)
    asked = []
    rows = _rows_of(f, x, 0.25)
    b = tableau.ridders(lambda i, idx, keep=None: asked.append(None if idx is None else len(idx)) or rows(i, idx),
                            RIDDERS_ROWS, x.shape, trace=gathered, gather=True)
    assert all(np.array_equal(u, v, equal_nan=True) for u, v in zip(a, b))
    for key in ("chosen_row", "chosen_column", "stopped_row"):
        assert np.array_equal(whole[key], gathered[key])
    # later rows were asked only for the points still unsure
    assert asked[0] is None and min(n for n in asked[1:] if n is not None) < x.shape[-1]


@pytest.mark.parametrize("expr, x", [("sin(x)", 1e150), ("cos(x)", -1e150), ("sin(x)", 3e200)])
def test_where_one_ulp_of_x_moves_f_visibly_no_step_vouches(expr, x):
    # sin at 1e150 changes by O(1) between neighbouring floats: any step's samples alias, and a step
    # of 6e144 used to look converged on a derivative of 1e-146 while the true one is cos(1e150)
    g = parse(expr)
    r = numeric.central(g, {"x": x})
    with mpmath.workdps(400):  # enough digits to reduce x modulo 2 pi
        exact = float(mpmath.cos(x) if expr.startswith("sin") else -mpmath.sin(x))
    assert r.status == "unavailable" or abs(r.jacobian[0, 0] - exact) <= r.error[0, 0]
    rep = gradcli_grad(expr, {"x": x})
    assert rep.status == "agree" and rep.exit_code == 0


def test_large_arguments_of_a_slow_function_keep_their_digits():
    # the same clamp to one ulp leaves smooth functions at large x alone
    for x in (1e5, 1e150, 1e300):
        r = numeric.central(parse("log(x)"), {"x": x})
        assert r.status == "ok" and abs(r.jacobian[0, 0] * x - 1) <= r.error[0, 0] * x + 1e-15
        assert r.error[0, 0] * x < 1e-6
