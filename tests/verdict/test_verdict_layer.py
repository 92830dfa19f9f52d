"""The verdict layer: one tolerance, one judgement, one verdict and one set of differences for every mode."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from gradcli.batch import methods as bm
from gradcli.methods import numeric
from gradcli.core.parser import parse
from gradcli.core import constants as C
from gradcli.verdict import tolerance as vt
from gradcli.methods.tableau import ridders
from gradcli.verdict.status import batch_verdict, overall_status


def test_default_tolerance_is_the_documented_sum():
    ref, scale, spread, est, floor = (np.array([2.0, -1e-3]), np.array([3.0, 1.0]), np.array([1e-16, 0.0]),
                                      np.array([1e-9, np.nan]), np.array([1e-8, 2e-8]))
    got = vt.tolerance(np, ref, scale, spread, est, floor, (1e-6, 0.0), numerical=True)
    # rtol * max(|ref|, scale) + subnormal + 10 * spread + 10 * estimate (nan: no estimate, anything goes) + floor
    want0 = 1e-6 * 3.0 + C.SUBNORMAL + 10 * 1e-16 + 10 * 1e-9 + 1e-8
    assert got[0] == pytest.approx(want0, rel=1e-15)
    assert got[1] == math.inf
    exact = vt.tolerance(np, ref, scale, spread, None, floor, (1e-10, 0.0))  # AD: no estimate, no floor
    assert exact[1] == pytest.approx(1e-10 * 1.0 + C.SUBNORMAL, rel=1e-15)


def test_user_tolerance_is_numpy_isclose_convention():
    ref = np.array([2.0, 0.0])
    tol = vt.tolerance(np, ref, np.array([100.0, 100.0]), np.array([1.0, 1.0]), np.array([5.0, 5.0]),
                       np.array([1.0, 1.0]), (1e-6, 0.0), rtol=1e-3, atol=1e-12, numerical=True)
    np.testing.assert_array_equal(tol, 1e-3 * np.abs(ref) + 1e-12)
    got, want = ref + tol * 0.999, ref + tol * 1.001
    assert np.isclose(got, ref, rtol=1e-3, atol=1e-12).all() and not np.isclose(want, ref, rtol=1e-3, atol=1e-12).any()


def test_judge_entries_masks():
    ref = np.array([1.0, 1.0, 1.0, 2.0, 0.0])
    J = np.array([1.0 + 1e-9, np.nan, 1.5, 3.1, 0.0])
    est = np.array([1e-9, 1e-9, 0.9, 1.0, 0.0])
    live = np.array([True, True, True, True, False])
    tol = np.array([1e-8, 1e-8, 10.0, 10.0, 0.0])
    j = vt.judge_entries(np, J, np.abs(J - ref), ref, live, tol, est, np.zeros(5), numerical=True,
                         default_tol=True)
    np.testing.assert_array_equal(j.nonfinite, [False, True, False, False, False])
    np.testing.assert_array_equal(j.vague, [False, False, True, False, False])  # 0.9 > 0.5 * max(1.5, 1)
    np.testing.assert_array_equal(j.unseen, [False, False, False, True, False])  # 1.1 off 2, inside 10
    np.testing.assert_array_equal(j.exceeds, [False, True, False, False, False])
    ad = vt.judge_entries(np, J, np.abs(J - ref), ref, live, tol, None, None, numerical=False, default_tol=True)
    assert ad.nonfinite is None and ad.exceeds.tolist() == j.exceeds.tolist()


def test_ill_conditioned_and_floor():
    ref, scale = np.array([1.0, 1e-9, np.nan]), np.array([1.0, 1.0, 1.0])
    spread = np.array([2e-3, 5e-10, 1.0])  # 5e-10 against max(1e-9, 1e-6 * 1) is ordinary cancellation
    assert vt.ill_conditioned(np, ref, scale, spread).tolist() == [True, False, False]
    fl = vt.floor(1e-8, np.array([3.0, -1.0]), np.array([1.0, 4.0]))
    np.testing.assert_allclose(fl, [[4e-8, 1e-8], [2e-8, 0.5e-8]])
    assert vt.batch_floor_share(np.float64) == pytest.approx(1.4901161193847656e-08)


def test_overall_status_order():
    assert overall_status(["central"], {"undefined"}) == "disagree"
    assert overall_status([], {"undefined", "nondifferentiable"}) == "undefined"
    assert overall_status([], {"nondifferentiable"}) == "nondifferentiable"
    assert overall_status([], set(), have_reference=False) == "undefined"
    assert overall_status([], set()) == "agree"


def _bm(name, mismatched=0, compared=10, reference=False, status="ok"):
    return SimpleNamespace(name=name, mismatched=mismatched, compared=compared, reference=reference,
                           status=status)


def test_batch_verdict():
    report = SimpleNamespace(methods={"symbolic": _bm("symbolic", reference=True), "central": _bm("central", 3)},
                             undefined=2, points=20, reference="symbolic")
    batch_verdict(report)
    assert report.status == "disagree" and "at up to 3 of 20 points; 2 of 20 points undefined" in report.message
    report.methods = {"central": _bm("central", compared=0)}
    batch_verdict(report)
    assert report.status == "undefined"
    report.undefined = 0
    batch_verdict(report)
    assert report.status == "agree"


CASES = ["exp(-(x**2 + y**2)/2) * cos(3*x*y)", "sin(x)*y", "abs(x) + y*y", "log(x) + sqrt(y)", "tan(x*y)",
         "x/(y - 1)", "max(x, y) * x"]


@pytest.mark.parametrize("text", CASES)
def test_point_and_batch_central_are_one_algorithm(text):
    """grad --at and grad --batch give the same numerical estimates and error estimates, to the bit."""
    g = parse(text)
    rng = np.random.default_rng(3)
    pts = {v: rng.uniform(0.01, 2.0, 12) for v in g.variables}
    pts["x"][0], pts["y"][0] = 1.0, 1.0  # on the kink of max and the pole of 1/(y - 1)
    cen = bm.central(g, pts, np, np.float64, n=12)
    batch = {"central": cen[:2], "richardson": bm.richardson(g, pts, np, np.float64, cen, n=12)}
    if not numeric.holomorphic_blockers(g):
        batch["complex_step"] = bm.complex_step(g, pts, np, np.float64, n=12)
    for name, (J, E) in batch.items():
        for p in range(12):
            r = getattr(numeric, name)(g, {v: pts[v][p] for v in g.variables})
            np.testing.assert_array_equal(r.jacobian, J[:, :, p], err_msg=name)
            np.testing.assert_array_equal(r.error, E[:, :, p], err_msg=name)


def test_central_estimate_bounds_its_error():
    g = parse("exp(-(x**2 + y**2)/2) * cos(3*x*y)")
    rng = np.random.default_rng(5)
    pts = {"x": rng.uniform(-1, 1, 200), "y": rng.uniform(-1, 1, 200)}
    J, E, _ = bm.central(g, pts, np, np.float64, n=200)
    x, y = pts["x"], pts["y"]
    env = np.exp(-(x ** 2 + y ** 2) / 2)
    dx = env * (-x * np.cos(3 * x * y) - 3 * y * np.sin(3 * x * y))
    dy = env * (-y * np.cos(3 * x * y) - 3 * x * np.sin(3 * x * y))
    err = np.abs(J[0] - np.stack([dx, dy]))
    assert (err <= E[0] + 4e-16).all() and np.median(E[0]) < 1e-8


def test_ridders_extrapolates_to_the_derivative():
    x0, h0 = 0.7, 0.1
    D = [np.array([(np.exp(x0 + h0 / 2 ** i) - np.exp(x0 - h0 / 2 ** i)) / (2 * h0 / 2 ** i)]) for i in range(10)]
    best, err = ridders(lambda i: D[i], 10, (1,))
    assert abs(best[0] - math.exp(x0)) < 1e-13 and abs(best[0] - math.exp(x0)) <= 10 * err[0]


def test_one_name_per_constant():
    """The differences and the comparisons read the verdict layer's constants, not copies of their own."""
    from gradcli.verdict import point as compare
    from gradcli.batch import compare as bc
    from gradcli.checks.comparisons import numeric as cn

    for mod in (compare, bc, numeric, bm, cn):
        for name in ("ESTIMATE_SAFETY", "ROUNDING_SAFETY", "NUMERICAL", "TOLERANCES", "RIDDERS_SAFE",
                     "RIDDERS_CREDIBLE", "COMPLEX_H", "ESTIMATE_GAP", "COMPLEX_STEP", "RIDDERS_ROWS"):
            if hasattr(mod, name):
                assert getattr(mod, name) is getattr(C, name), (mod.__name__, name)
