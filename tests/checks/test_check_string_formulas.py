"""String checks decide by the formulas, not by one point: a grad= formula that agrees with the
derivative at the inputs by chance fails at a random point of the same smooth piece; one that sympy
proves equal, or that agrees at every point, passes with a note saying which."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcli.checks.targets.expression_formulas import PROVED
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check


def run(text, **kw):
    return run_check(build_spec(text, **kw), {})


def test_a_formula_right_at_the_point_only_fails():
    r = run("x*sin(y)", grad={"x": "sin(y)", "y": "cos(y)"}, x=1.0, y=2.0)
    assert r.status == "fail", r.message
    assert "grad['y'] = cos(y)" in r.message and "x*cos(y)" in r.message
    r = run("x*sin(y)", grad={"x": "sin(y)", "y": "x*cos(y)"}, x=1.0, y=2.0)
    assert r.status == "pass" and PROVED in r.notes


def test_wrong_at_a_zero_input_and_over_arrays():
    assert run("x*y", grad={"x": "y", "y": "0"}, x=0.0, y=0.0).status == "fail"
    assert run("x**2*exp(y)", grad={"x": "2*x*exp(y)", "y": "x**2"}, x=(5,), y=0.0).status == "fail"
    assert run("x**2*exp(y)", grad={"x": "2*x*exp(y)", "y": "x**2*exp(y)"}, x=(5,), y=0.0).status == "pass"


@pytest.mark.parametrize("text, grad, x", [
    ("tanh(x)", "1/cosh(x)**2", 0.3),              # another form: simplify proves it
    ("log(1+exp(x))", "1/(1+exp(-x))", -0.4),
    ("abs(x)", "x/abs(x)", 1.5),                   # sympy's sign(x): the points decide
    ("abs(x-1)", "sign(x)", 2.0),                  # right on the piece x > 1 that holds the point
    ("max(x, 2)", "1", 3.0),
    ("tanh(x)", "1 - tanh(x)**2 + 1e-9*x", 0.3),   # within the tolerance
])
def test_right_formulas_pass(text, grad, x):
    r = run(text, grad={"x": grad}, x=x)
    assert r.status == "pass", r.message
    assert any(n == PROVED or n.startswith("grad= agrees with sympy's derivative at 8 random points")
               for n in r.notes), r.notes


def test_candidates_come_from_the_domain_when_given():
    wrong_past_5 = {"x": "2*x + relu(x - 5)"}
    assert run("x**2", grad=wrong_past_5, x=1.0).status == "pass"  # near x = 1 it is 2x
    assert run("x**2", grad=wrong_past_5, x=1.0, domain=(4.0, 8.0)).status == "fail"


DERIVATIVES = {"sin(x)": "cos(x)", "exp(x)": "exp(x)", "log(x)": "1/x", "tanh(x)": "1 - tanh(x)**2",
               "sqrt(x)": "0.5/sqrt(x)", "atan(x)": "1/(1 + x*x)", "erf(x)": "2/sqrt(pi)*exp(-x*x)",
               "sigmoid(x)": "sigmoid(x)*(1 - sigmoid(x))", "softplus(x)": "sigmoid(x)",
               "asinh(x)": "1/sqrt(x*x + 1)", "cbrt(x)": "1/(3*cbrt(x)**2)"}


@settings(max_examples=25, deadline=None)
@given(f=st.sampled_from(sorted(DERIVATIVES)), x0=st.floats(0.2, 3.0), k=st.floats(0.05, 2.0))
def test_a_formula_bent_away_from_the_point_fails(f, x0, k):
    """D * (1 + k (x - x0)) equals the derivative D exactly at x0 and nowhere near it."""
    assert run(f, grad={"x": DERIVATIVES[f]}, x=x0).status == "pass"
    bent = run(f, grad={"x": f"({DERIVATIVES[f]})*(1 + {k!r}*(x - {x0!r}))"}, x=x0)
    assert bent.status == "fail", bent.message
