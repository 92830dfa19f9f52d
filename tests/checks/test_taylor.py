"""The Taylor-remainder test (gradcli.checks.comparisons.taylor): slope ~2 for right gradients and ~1 for wrong ones
across the shipped examples, the fit read at the small-step end, inconclusive checks resolved by it,
and the ``--taylor`` column of ``gradcli check``."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from gradcli.checks.collect import collect
from gradcli.checks.context import Outcome, Verdict
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.checks.comparisons.taylor import fit
from gradcli.cli import main
from cli_helpers import RUNNER, numpy_examples


EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")


def _specs(folder):
    specs, errors = collect([folder], None)
    assert not errors
    return specs


CORRECT = [s for f in numpy_examples() for s in _specs(f) if os.sep + "bugs" + os.sep not in os.path.normpath(s.file)]
BUGGY = _specs(os.path.join(EXAMPLES, "bugs"))


@pytest.mark.parametrize("spec", CORRECT, ids=lambda s: s.name)
def test_right_gradients_have_slope_2(spec):
    r = run_check(spec, {"taylor": True})
    assert r.status == "pass"
    assert r.taylor_verdict == "right", r.taylor.detail
    assert 1.8 <= r.taylor_slope <= 2.2
    assert r.to_dict()["taylor"]["verdict"] == "right"


@pytest.mark.parametrize("spec", BUGGY, ids=lambda s: s.name)
def test_wrong_gradients_have_slope_1(spec):
    # the 1e-3-relative bug (eps_mismatch) shows slope 2 down to h ~ 2^-10 and slope 1 below: the verdict is
    # read at the small-step end
    r = run_check(spec, {"taylor": True})
    assert r.status == "fail"
    assert r.taylor_verdict == "wrong", r.taylor.detail
    assert 0.8 <= r.taylor_slope <= 1.2


def test_the_fit_reads_the_small_step_end():
    h = 2.0 ** -np.arange(1, 27)
    a, c = 1e-3, 1.0  # a small error: h^2 dominates above h ~ 1e-3, h below
    r = np.abs(a * h + c * h * h)
    slope, cls, lo, hi, _ = fit(h, r, np.full(h.shape, 1e-16), 1)
    assert cls == 1 and abs(slope - 1) < 0.1 and h[lo] < 2e-3
    slope, cls, *_ = fit(h, c * h * h, np.full(h.shape, 1e-16), 1)
    assert cls == 2 and abs(slope - 2) < 1e-9
    slope, cls, *_ = fit(h, np.full(h.shape, 1e-17), np.full(h.shape, 1e-16), 1)
    assert cls == 0 and slope is None  # exact: a linear function
    noisy = np.random.default_rng(0).uniform(1, 10, h.shape)
    slope, cls, *_ = fit(h, noisy, np.full(h.shape, 1e-16), 1)
    assert cls is None


def test_a_linear_function_is_exact():
    r = run_check(build_spec(lambda x: np.sum(3 * x), grad=lambda x: np.full(x.shape, 3.0), x=(5,), taylor=True), {})
    assert r.status == "pass" and r.taylor_verdict == "right" and r.taylor_slope is None
    assert "rounding level" in r.taylor.detail


def _f32(x):
    x32 = np.asarray(x, dtype=np.float32)  # float32 arithmetic inside, and the trace is cut: no AD
    return float(np.sum(np.sin(x32) ** 2 * np.cos(x32)))


def _f32_grad(x):
    return 2 * np.sin(x) * np.cos(x) ** 2 - np.sin(x) ** 3


def test_an_inconclusive_check_is_resolved_by_the_taylor_test(monkeypatch):
    import gradcli.checks.comparisons.taylor as taylor

    spec = build_spec(_f32, grad=_f32_grad, x=(5,))
    # without the Taylor test the finite differences cannot decide (f rounds in float32)
    monkeypatch.setattr(taylor, "taylor_test", lambda *a, **k: taylor.TaylorResult(1, None, "undetermined", "off"))
    assert run_check(spec, {}).status == "inconclusive"
    monkeypatch.undo()
    r = run_check(spec, {})
    # slope 2, but the float32 noise limits its resolution to ~1e-2: still not verified
    assert r.status == "inconclusive" and "only to" in r.message, r.message
    assert r.taylor_verdict == "right" and 1.8 <= r.taylor_slope <= 2.2


def test_a_fine_taylor_test_resolves_an_inconclusive_check(monkeypatch):
    import gradcli.checks.comparisons.full as compare

    spec = build_spec(lambda x: np.sum(np.sin(x) * x), grad=lambda x: np.cos(x) * x + np.sin(x), x=(5,))

    def undecided(ctx, got, ref, err, kink, cols, refdesc, **kw):  # the tolerance test says: cannot decide
        return Outcome(verdict=Verdict("inconclusive", "forced"))
    monkeypatch.setattr(compare, "verdict_of_elements", undecided)
    r = run_check(spec, {})
    assert r.status == "pass" and "resolved by the Taylor test" in r.message, r.message
    assert r.taylor.resolution <= 1e-3


def test_a_wrong_gradient_the_differences_cannot_decide_fails_by_the_taylor_test(monkeypatch):
    import gradcli.checks.comparisons.full as compare

    spec = build_spec(_f32, grad=lambda x: _f32_grad(x) * 0.5, x=(5,))
    def undecided(ctx, got, ref, err, kink, cols, refdesc, **kw):  # the tolerance test says: cannot decide
        return Outcome(verdict=Verdict("inconclusive", "forced"))
    monkeypatch.setattr(compare, "verdict_of_elements", undecided)
    r = run_check(spec, {})
    assert r.status == "fail" and "the Taylor test decides" in r.message
    assert r.taylor_verdict == "wrong"


def test_cli_taylor_column():
    r = RUNNER.invoke(main, ["check", os.path.join(EXAMPLES, "mlp.py"), os.path.join(EXAMPLES, "bugs",
                                                                                   "forgotten_mean.py"), "--taylor"],
                      env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.exit_code == 1, r.stderr
    assert r.stderr == ""
    assert "taylor slope" in r.stdout
    assert "2.00 right" in r.stdout and "1.00 wrong" in r.stdout


def test_cli_without_taylor_has_no_column_and_json_has_the_slope():
    r = RUNNER.invoke(main, ["check", os.path.join(EXAMPLES, "mlp.py")], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.exit_code == 0 and "taylor slope" not in r.stdout
    r = RUNNER.invoke(main, ["check", os.path.join(EXAMPLES, "mlp.py"), "--taylor", "--json"])
    assert r.exit_code == 0
    (c,) = json.loads(r.stdout)["checks"]
    assert c["taylor"]["verdict"] == "right" and 1.8 <= c["taylor"]["slope"] <= 2.2
    r = RUNNER.invoke(main, ["check", os.path.join(EXAMPLES, "mlp.py"), "--json"])
    assert "taylor" not in json.loads(r.stdout)["checks"][0]


def test_taylor_option_is_validated():
    from gradcli.core.errors import BadInput

    with pytest.raises(BadInput, match="taylor"):
        build_spec(lambda x: x, x=(2,), taylor="yes")
