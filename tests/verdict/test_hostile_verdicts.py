"""Verdicts that were wrong on hostile points: exact rules failing at large arguments, numerical methods
that could not resolve a point reported as a disagreement, and a numerical reference's own error blamed
on exact AD. References are closed forms evaluated with mpmath, independent of gradcli's table."""
import mpmath
import numpy as np
import pytest

import gradcli
from gradcli.core.parser import parse_expression
from gradcli.methods import differences, forward, reverse



@pytest.mark.parametrize("expr,x,exact", [
    ("asinh(x)", 1e200, lambda x: 1 / mpmath.sqrt(x * x + 1)),
    ("asinh(x)", -1e300, lambda x: 1 / mpmath.sqrt(x * x + 1)),
    ("acosh(x)", 1e155, lambda x: 1 / mpmath.sqrt(x * x - 1)),
    ("acosh(x)", 1e300, lambda x: 1 / mpmath.sqrt(x * x - 1)),
    ("acosh(x)", 1.0000001, lambda x: 1 / mpmath.sqrt(x * x - 1)),
    ("asinh(x)", 0.3, lambda x: 1 / mpmath.sqrt(x * x + 1)),
])
def test_the_table_rules_hold_at_large_arguments(expr, x, exact):
    g = parse_expression(expr)
    with mpmath.workdps(50):
        want = float(exact(mpmath.mpf(x)))
    for J in (forward.jacobian(g, {"x": x})[1], reverse.jacobian(g, {"x": x})[1]):
        assert J[0, 0] == pytest.approx(want, rel=1e-14)
    r = gradcli.grad(expr, x=x)
    assert r.status == "agree" and r.methods["forward"].status == "ok"


def test_the_table_rules_hold_at_large_arguments_in_a_batch():
    r = gradcli.grad_batch("asinh(x)", n=200, domain={"x": (1e150, 1e300)}, seed=3)
    assert r.status == "agree"
    assert r.methods["forward"].agree_fraction == 1.0


@pytest.mark.parametrize("x", [711.0, -711.0, 0.0, 0.3, -30.0])
def test_tanh_second_derivative_does_not_overflow(x):
    r = gradcli.hessian("tanh(x)", x=x)
    with mpmath.workdps(50):
        want = float(-2 * mpmath.tanh(x) / mpmath.cosh(x) ** 2)
    assert r.status == "agree", r.message
    for name in ("forward_over_reverse", "reverse_over_forward"):
        assert r.methods[name].status == "ok"
        assert r.methods[name].hessian[0, 0] == pytest.approx(want, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("expr,point", [
    ("sin(x + 1e6)", {"x": -2.0}), ("cos(x + 12345678.9)", {"x": 1.0}), ("exp(x + 1e10 - 1e10)", {"x": 1.0}),
    ("exp(t)**w", {"w": 1.5, "t": 1e-10}),
])
def test_hessian_differences_know_the_rounding_of_their_intermediates(expr, point):
    # the gradient's program rounds an intermediate as large as 1e10: central differences of it cannot
    # resolve a step below that rounding, and must say so (or be right), never blame exact AD
    r = gradcli.hessian(expr, **point)
    assert r.status == "agree", r.message
    c = r.methods["central_of_reverse"]
    assert c.status in ("ok", "unavailable")
    for name in ("forward_over_reverse", "reverse_over_forward"):
        assert r.methods[name].status == "ok"


@pytest.mark.parametrize("expr,x", [("tan(x)", 1e100), ("sin(x - 1/8e-11)", -2.0)])
def test_differences_that_cannot_resolve_a_point_are_unavailable(expr, x):
    r = gradcli.grad(expr, x=x)
    assert r.status == "agree", r.message
    assert r.methods["forward"].status == "ok" and r.methods["reverse"].status == "ok"
    for name in ("central", "richardson", "complex_step"):
        assert r.methods[name].status in ("ok", "unavailable")
        if r.methods[name].status == "ok":  # then its number is right
            assert r.methods[name].rel_error.max() < 1e-6


def test_the_central_estimate_bounds_its_error_behind_a_rounded_intermediate():
    # sin(x - 1.25e10): the argument is rounded to 2e-6, so no step below that sees f move
    g = parse_expression("sin(x - 1/8e-11)")
    from gradcli.methods import numeric
    res = numeric.central(g, {"x": -2.0})
    with mpmath.workdps(50):
        exact = float(mpmath.cos(mpmath.mpf(-2) - mpmath.mpf(1) / mpmath.mpf("8e-11")))
    assert not abs(res.jacobian[0, 0] - exact) > res.error[0, 0]


def test_rounding_scale_is_the_first_order_rounding_of_the_moving_intermediates():
    g = parse_expression("sin(x - 1/8e-11)")
    x = -2.0
    u = x - 1 / 8e-11
    s = differences.rounding_scale(g, {"x": x})
    # |adjoint * value| of x - c (adjoint cos(u)) and of sin(u) (adjoint 1); the constant 1/8e-11 does
    # not move with x: its rounding shifts the point, it is no noise
    assert s.shape == (1, 1)
    assert s[0, 0] == pytest.approx(abs(np.cos(u) * u) + abs(np.sin(u)), rel=1e-12)
    batch = differences.rounding_scale(g, {"x": np.array([x, 0.5])})
    assert batch.shape == (1, 2) and batch[0, 0] == pytest.approx(s[0, 0])


def test_an_identical_expression_written_twice_gets_one_verdict():
    a = gradcli.grad("(1 - z * -e**-2)/log1p(a - a/a)", z=0.0, a=1e-8)
    b = gradcli.grad("(1 + z*e**-2)/log1p(a - a/a)", z=0.0, a=1e-8)
    assert a.status == b.status == "agree"


@pytest.mark.parametrize("expr,x,exact,ok", [
    ("log(x)", 1e-200, lambda x: 1 / x, True),
    ("1/x", 1e150, lambda x: -1 / x ** 2, True),
    ("x**3", 1e100, lambda x: 3 * x ** 2, True),
    ("tan(x)", 1e100, None, False),   # the relative step spans periods; the absolute step says so
    ("x**2", 1e-200, None, False),    # f'*h underflows at every step
])
def test_complex_step_vouches_only_for_numbers_it_resolves(expr, x, exact, ok):
    r = gradcli.grad(expr, x=x)
    c = r.methods["complex_step"]
    assert r.status == "agree"
    if ok:
        assert c.status == "ok"
        with mpmath.workdps(50):
            want = float(exact(mpmath.mpf(x)))
        assert c.jacobian[0, 0] == pytest.approx(want, rel=1e-14)
    else:
        assert c.status == "unavailable"


def test_a_numerical_reference_is_not_blamed_on_exact_ad():
    # sympy cannot evaluate sin(sinh(3e16)) in time: the reference falls back to Richardson, whose own
    # error (1e-10 on d(t - w*w)/dw) must not be charged to forward and reverse, exact here
    r = gradcli.grad("min(cosh(t), 1), sin(sinh(3e+16)), t - w*w", w=0.806, t=-173756.97968858667, timeout=1)
    assert r.reference == "richardson"
    assert r.methods["forward"].status == "ok" and r.methods["reverse"].status == "ok"
    assert r.status != "disagree"


@pytest.mark.parametrize("expr,points", [
    # sympy's formula in float64 loses these digits; forward and reverse are right to 15 digits
    ("tanh(3*w - z/w/216)", {"w": [0.0003179929729320019, 0.5], "z": [0.8207978897759668, 0.5]}),
    # the formula's exp(250 + 2/t) overflows on the way to a finite 1.3e-301
    ("atan2(softplus(-2/t - 250), t)", {"t": [0.004349854948529597, 0.005]}),
])
def test_a_batch_reference_lost_to_its_own_float64_rounding_does_not_blame_ad(expr, points):
    r = gradcli.grad_batch(expr, points={k: np.array(v) for k, v in points.items()})
    assert r.methods["forward"].status == "ok" and r.methods["reverse"].status == "ok", r.message
    assert r.methods["forward"].mismatched == 0


def test_the_batch_reference_bound_sees_the_overflowed_term():
    # the point's forward-mode gradient against mpmath: the consensus that stood in is right
    with mpmath.workdps(50):
        t = mpmath.mpf(0.004349854948529597)
        exact = float(mpmath.diff(lambda s: mpmath.atan2(mpmath.log1p(mpmath.exp(-2 / s - 250)), s), t))
    J = forward.jacobian(parse_expression("atan2(softplus(-2/t - 250), t)"), {"t": float(t)})[1][0, 0]
    assert J == pytest.approx(exact, rel=1e-2)  # subnormal intermediates: 3 digits is all float64 has


def test_exact_operations_add_no_rounding():
    # -max(z, y)/1e-3: the gradient program's sign and max are exact; charging them rounding would make
    # the Hessian's differences "unavailable" where they find its exact 0
    r = gradcli.hessian("(-(max(z, y)))/(1e-3)", y=0.13360246192057268, z=-1.2152298011151146)
    assert r.status == "agree" and r.methods["central_of_reverse"].status == "ok"
    g = parse_expression("abs(x) + max(x, 1)")
    assert differences.rounding_scale(g, {"x": -3.0})[0, 0] == pytest.approx(4.0)  # only the sum rounds


@pytest.mark.parametrize("expr,point", [("x**y", {"x": 0.0, "y": 2.0}), ("1/x", {"x": 0.0})])
def test_rounding_at_a_pole_is_no_crash(expr, point):
    r = gradcli.hessian(expr, **point)
    assert all(m.status != "error" for m in r.methods.values()), {k: m.message for k, m in r.methods.items()}
