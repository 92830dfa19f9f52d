"""Verdicts at a point: known derivatives, cross-method agreement, undefined and kinked points."""
import math

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings

import gradcli
from gradcli.verdict.point import compare_point, magnitudes, parse_methods
from gradcli.verdict.diagnose import diagnose
from gradcli.methods import forward, reverse, symbolic
from gradcli.core.parser import parse
from strategies import coords, expressions

KNOWN = [
    ("x**2*sin(y)", {"x": 1.5, "y": 0.3}, {"x": 2 * 1.5 * math.sin(0.3), "y": 1.5 ** 2 * math.cos(0.3)}),
    ("exp(x)*log(y)", {"x": 0.5, "y": 2.0}, {"x": math.exp(0.5) * math.log(2.0), "y": math.exp(0.5) / 2.0}),
    ("atan2(y, x)", {"x": 1.0, "y": -1.0}, {"x": 0.5, "y": 0.5}),
    ("hypot(x, y)", {"x": 3.0, "y": 4.0}, {"x": 0.6, "y": 0.8}),
    ("cbrt(x)", {"x": -8.0}, {"x": 1 / 12}),
    ("log(x, 2)", {"x": 8.0}, {"x": 1 / (8 * math.log(2))}),
    ("x^3", {"x": 2.0}, {"x": 12.0}),
    ("-x**2", {"x": 3.0}, {"x": -6.0}),
    ("x**-2", {"x": 2.0}, {"x": -0.25}),
    ("max(x, y, 0.5)", {"x": 1.0, "y": 2.0}, {"x": 0.0, "y": 1.0}),
    ("sigmoid(x)", {"x": 0.0}, {"x": 0.25}),
    ("softplus(x)", {"x": 0.0}, {"x": 0.5}),
    ("relu(x)", {"x": -1.0}, {"x": 0.0}),
    ("erf(x)", {"x": 0.0}, {"x": 2 / math.sqrt(math.pi)}),
    ("sqrt(x*y)", {"x": 2.0, "y": 8.0}, {"x": 1.0, "y": 0.25}),
    ("pow(x, y)", {"x": 2.0, "y": 3.0}, {"x": 12.0, "y": 8 * math.log(2)}),
    ("x*pi + e", {"x": 1.0}, {"x": math.pi}),
]


@pytest.mark.parametrize("expr,point,expected", KNOWN)
def test_known_derivatives(expr, point, expected):
    r = gradcli.grad(expr, **point)
    assert r.status == "agree", (r.status, r.message)
    for name, want in expected.items():
        assert r.gradient[name] == pytest.approx(want, rel=1e-14, abs=1e-15)
        for m in ("forward", "reverse", "central", "richardson"):
            assert r.methods[m].jacobian[0, r.variables.index(name)] == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert r.exit_code == 0


@pytest.mark.parametrize("expr,point,status", [
    ("abs(x)", {"x": 0.0}, "nondifferentiable"),
    ("relu(x)", {"x": 0.0}, "nondifferentiable"),
    ("max(x, x)", {"x": 1.0}, "nondifferentiable"),
    ("sign(x)", {"x": 0.0}, "nondifferentiable"),
    ("hypot(x, y)", {"x": 0.0, "y": 0.0}, "nondifferentiable"),
    ("log(x)", {"x": -1.0}, "undefined"),
    ("log(x)", {"x": 0.0}, "undefined"),
    ("sqrt(x)", {"x": 0.0}, "undefined"),
    ("asin(x)", {"x": 2.0}, "undefined"),
    ("asin(x)", {"x": 1.0}, "undefined"),
    ("1/x", {"x": 0.0}, "undefined"),
    ("x**0.5", {"x": -4.0}, "undefined"),
    ("cbrt(x)", {"x": 0.0}, "undefined"),
    ("atan2(y, x)", {"x": 0.0, "y": 0.0}, "undefined"),
    ("log(x, y)", {"x": 2.0, "y": 1.0}, "undefined"),
    ("exp(x)", {"x": 1000.0}, "undefined"),
])
def test_undefined_and_kinks_are_never_confident_numbers(expr, point, status):
    r = gradcli.grad(expr, **point)
    assert r.status == status, r.message
    assert r.exit_code == 3
    assert r.message
    doc = r.to_dict()
    # the affected entries are null in every method
    for m in doc["methods"].values():
        g = m["gradient"]
        assert g is None or all(v is None for v in g.values()) or status == "nondifferentiable" and len(point) > 1


def test_a_kink_spoils_only_the_entries_that_depend_on_it():
    r = gradcli.grad("abs(x) + 3*y", x=0.0, y=2.0)
    assert r.status == "nondifferentiable"
    assert r.gradient == {"x": None, "y": 3.0}
    assert r.methods["forward"].jacobian[0, 1] == 3.0


def test_constant_subexpressions_outside_a_domain_are_undefined_values():
    r = gradcli.grad("x + log(-1)", x=1.0)
    assert r.status == "undefined" and r.value is None


def test_a_wrong_method_is_flagged(monkeypatch):
    from gradcli.core.primitives import PRIMITIVES

    sin = PRIMITIVES["sin"]
    monkeypatch.setitem(PRIMITIVES, "sin", sin.__class__(**{**sin.__dict__, "partials": (
        lambda F, a, x: F.cos(x) * 1.001,)}))
    r = gradcli.grad("sin(x)", x=0.7)
    assert r.status == "disagree" and r.exit_code == 1
    assert r.methods["forward"].status == "mismatch" and r.methods["reverse"].status == "mismatch"
    assert r.methods["central"].status == "ok" and r.methods["complex_step"].status == "ok"
    assert r.methods["forward"].max_rel_error == pytest.approx(1e-3, rel=1e-6)


def test_cancellation_does_not_fail_correct_ad():
    # d/dx (x - sin(x)) = 1 - cos(x) ~ x**2/2: float64 resolves it only relative to the terms (~1). At
    # 1e-5 the program keeps 5 digits and says how many it lost; at 1e-8 it computes 0 for 5e-17, which
    # is ill-conditioned, not a disagreement; at 0 it is exact
    for x in (1e-5, 0.0):
        r = gradcli.grad("x - sin(x)", x=x)
        assert r.status == "agree", (x, r.message)
    assert any(d.kind == "precision" and "cancellation in x - sin(x)" in d.message
               for d in gradcli.grad("x - sin(x)", x=1e-5).diagnostics)
    r = gradcli.grad("x - sin(x)", x=1e-8)
    assert r.status == "ill_conditioned" and r.exit_code == 3, r.message
    assert "cancellation in x - sin(x)" in r.message and "5e-17" in r.message


def test_what_the_program_cannot_resolve_is_ill_conditioned_with_the_exact_value_shown():
    # y**y is only known to an ulp (1e88) in float64, and tan of it to nothing: the derivative exists
    r = gradcli.grad("tan(y**y)", y=59.0)
    assert r.status == "ill_conditioned" and r.exit_code == 3
    assert "rounding of y**y" in r.message and "exact for the program as written" in r.message
    doc = r.to_dict()
    exact = float(sympy.diff(sympy.tan(sympy.Symbol("y") ** sympy.Symbol("y")), "y").subs("y", 59).evalf(30))
    assert doc["methods"]["symbolic"]["gradient"]["y"] == pytest.approx(exact, rel=1e-12)
    assert doc["methods"]["forward"]["gradient"]["y"] is not None  # what AD of the program gives, shown


def test_an_inexact_constant_is_no_loss_of_digits():
    # sin(pi) is 1.2e-16 in float64 and 0 exactly: one ulp of pi moves d/dx by as much, so d/dx is 0 to
    # the precision of the program's own constants, and every method finds it so
    r = gradcli.grad("x*sin(pi)", x=2.0)
    assert r.status == "agree" and r.exit_code == 0, r.message


def test_sympy_unavailable_falls_back_to_consensus():
    g = parse("sin(x)*exp(y)")
    r = compare_point(g, {"x": 0.4, "y": 0.2}, timeout=1e-6)
    assert r.reference in ("symbolic", "consensus")
    if r.reference == "consensus":
        assert r.status == "agree" and r.symbolic is None


def test_vector_valued_expression_has_a_jacobian():
    r = gradcli.grad("x*y, x+y", x=2.0, y=3.0)
    np.testing.assert_allclose(r.jacobian, [[3.0, 2.0], [1.0, 1.0]], rtol=1e-15)
    doc = r.to_dict()
    assert doc["value"] == [6.0, 5.0]
    assert doc["methods"]["reverse"]["jacobian"] == [[3.0, 2.0], [1.0, 1.0]]
    assert doc["symbolic"] == [{"x": "y", "y": "x"}, {"x": "1", "y": "1"}]


def test_method_selection():
    assert parse_methods(["forward,reverse", "central"]) == ["forward", "reverse", "central"]
    r = gradcli.grad("x**3", x=2.0, methods=["forward"])
    assert list(r.methods) == ["forward"] and r.reference == "consensus"  # no symbolic method, no sympy
    assert r.gradient["x"] == 12.0 and r.status == "agree"
    r = gradcli.grad("x**3", x=2.0, methods=["forward", "symbolic"])
    assert list(r.methods) == ["symbolic", "forward"] and r.reference == "symbolic"
    with pytest.raises(ValueError, match="unknown method"):
        parse_methods(["backward"])


def test_reference_is_35_digits():
    r = symbolic.symbolic(parse("exp(x)"), {"x": 1.0})
    assert str(r.values[0][0]).startswith("2.71828182845904523536028747135266")


def test_errors_below_float_resolution_are_shown():
    r = gradcli.grad("x**2*sin(y)", x=1.5, y=0.3)
    assert 0 < r.methods["forward"].max_rel_error < 1e-15


# --- random expressions: forward, reverse and sympy agree wherever defined and smooth ----------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                   HealthCheck.too_slow])
@given(expressions, coords, coords, coords)
def test_random_expressions_forward_reverse_symbolic_agree(text, x, y, z):
    g = parse(text)
    point = {v: {"x": x, "y": y, "z": z}[v] for v in g.variables}
    diags, _, _ = diagnose(g, point)
    assume(not diags)
    vals, Jf = forward.jacobian(g, point)
    assume(all(abs(v) < 1e100 for v in vals))
    _, Jr = reverse.jacobian(g, point)
    sym = symbolic.symbolic(g, point, timeout=5)
    assume(sym.status == "ok")
    ref = np.array([[float(v) for v in row] for row in sym.values])
    assume(np.all(np.abs(ref) < 1e100))
    scale = magnitudes(g, point)
    # plus what float64 rounding alone explains: atan2(x, sin(pi)) has d/dx = sin(pi)/x**2, which is
    # 1.2e-16/x**2 in float64 and 0 exactly
    tol = 1e-10 * np.maximum(np.abs(ref), scale) + 10 * forward.rounding_spread(g, point)
    assert np.all(np.abs(Jf - ref) <= tol), (text, point, Jf, ref)
    assert np.all(np.abs(Jr - ref) <= tol), (text, point, Jr, ref)


def test_a_lone_variable_that_looks_like_a_call_is_warned_about():
    assert gradcli.grad("sinx", sinx=1.0).warnings == ["sinx is a variable; did you mean sin(x)?"]
    assert gradcli.grad("cost*x", cost=1.0, x=2.0).warnings == []


def test_many_variables_stay_cheap():
    # 300 variables: the numerical stencils go through in blocks, not as a 300 x 300 x rows array
    expr = "+".join(f"x{k}*x{k + 1}" for k in range(299))
    r = gradcli.grad(expr, point={f"x{k}": 0.5 + k / 1000 for k in range(300)}, timeout=2)
    assert r.status == "agree"
    assert r.gradient["x0"] == pytest.approx(0.501, rel=1e-14)


def test_a_constant_expression_has_an_empty_gradient():
    r = gradcli.grad("tanh(softplus(pi))")
    assert r.status == "agree" and r.gradient == {} and r.value == pytest.approx(math.tanh(math.log1p(math.exp(math.pi))))


def test_the_reference_is_reported_to_35_digits():
    doc = gradcli.grad("exp(x)*y", x=1.0, y=1.0).to_dict()
    assert doc["reference_digits"]["x"].startswith("2.71828182845904523536028747135266")
    assert doc["reference_digits"]["y"].startswith("2.71828182845904523536028747135266")
    doc = gradcli.grad("x*y, abs(x)", x=0.0, y=0.25).to_dict()
    assert doc["reference_digits"] == [{"x": "0.25000000000000000000000000000000000", "y": "0.0"},
                                       {"x": None, "y": "0.0"}]


@pytest.mark.parametrize("expr,point,digits", [
    # 1 - tanh(x)**2 cancels 260 digits at x = 300; sympy's default working precision stops at 100
    ("tanh(x)", {"x": 300.0}, "1.06015862120172432653547177890783"),
    ("tanh(x)", {"x": 150.0}, "2.05928008896480551246194476842685"),
    ("log(expm1(x))", {"x": 1e-200}, "1.00000000000000001789973760091724"),
])
def test_the_reference_keeps_its_digits_through_cancellation(expr, point, digits):
    r = gradcli.grad(expr, **point)
    assert r.status == "agree", r.message
    assert r.to_dict()["reference_digits"]["x"].startswith(digits)


@pytest.mark.parametrize("expr,point", [("1/cos(pi*x)", {"x": 0.5}), ("tan(pi*x)", {"x": 0.5}),
                                        ("x/sin(pi*y)", {"x": 1.0, "y": 1.0})])
def test_a_pole_on_an_exact_constant_is_undefined(expr, point):
    # cos(pi/2) is exactly 0; numerically it is a tiny number whose reciprocal is a confident garbage value
    r = gradcli.grad(expr, **point)
    assert r.status == "undefined" and r.exit_code == 3, r.message


def test_a_difference_quotient_that_cannot_see_a_derivative_is_unavailable():
    # at x = 40, f = exp(x) + y is 2e17: y's steps change f by less than its rounding, so central
    # differences give d/dy = 0 with an error estimate that would "cover" the true 1
    r = gradcli.grad("exp(x) + y", x=40.0, y=0.5)
    d = r.to_dict()["methods"]
    assert r.status == "agree"
    assert d["central"]["status"] == "unavailable" and d["richardson"]["status"] == "unavailable"


@pytest.mark.parametrize("expr,point,digits", [
    # sympy's log(1 + u) rounds 1 + u away at its working precision; log1p and softplus are evaluated by mpmath's log1p
    ("log(softplus(x))", {"x": -700.0}, "1.0000000000000000000000000000000"),
    ("1/log1p(x)", {"x": 1e-100}, "-9.99999999999999960016200394794233"),
    ("sqrt(softplus(x))", {"x": -300.0}, "3.58754798658220520991634645360449"),
])
def test_log1p_and_softplus_references_at_extreme_points(expr, point, digits):
    r = gradcli.grad(expr, **point)
    assert r.status == "agree", r.message
    assert r.to_dict()["reference_digits"]["x"].startswith(digits)


@pytest.mark.parametrize("expr,point", [("1e150*sqrt(x)", {"x": 1e-320}), ("1e300*log(x)", {"x": 1e-10})])
def test_a_derivative_beyond_float64_is_ill_conditioned_not_undefined(expr, point):
    # the derivative exists (it is finite), float64 cannot hold it
    r = gradcli.grad(expr, **point)
    assert r.status == "ill_conditioned" and r.exit_code == 3 and "beyond float64" in r.message


@pytest.mark.parametrize("expr,point", [
    ("sin(x)", {"x": 1e15}), ("sin(x)", {"x": 1e300}), ("cos(x)", {"x": 1e16}),  # steps span periods
    ("tan(x)", {"x": 1.5707963267948966}), ("1/(x-1)", {"x": 1.0000000000000002}),  # the pole within one ulp
    ("relu(x)", {"x": 5e-324}), ("max(x, y)", {"x": 1.0, "y": 1.0000000000000002}),  # the kink within one ulp
])
def test_differences_that_cannot_resolve_the_point_are_unavailable_not_a_disagreement(expr, point):
    # forward and reverse are exact here; a difference quotient whose smallest possible step already spans
    # a period, a pole or a kink has nothing to say, and must not turn a right gradient into "disagree"
    r = gradcli.grad(expr, **point)
    assert r.status == "agree", r.message
    for name in ("central", "richardson"):
        assert r.to_dict()["methods"][name]["status"] in ("ok", "unavailable")


def test_complex_step_where_its_step_cannot_be_small_is_unavailable():
    # 1e-20*|x| underflows below 1e-300 and the floor is then larger than x itself
    r = gradcli.grad("sqrt(x)", x=1e-305)
    assert r.status == "agree" and r.to_dict()["methods"]["complex_step"]["status"] == "unavailable"


@pytest.mark.parametrize("expr, at", [("0^y", {"y": 0.3}), ("x^0", {"x": 0.0}), ("0.0**y * x", {"y": 2.0, "x": 1.5})])
def test_powers_with_a_zero_have_their_derivative(expr, at):
    # 0**y is 0 for y > 0 (slope 0 in y); x**0 is 1 (slope 0 in x, also at 0): not undefined
    r = gradcli.grad(expr, **at)
    assert r.status == "agree" and r.exit_code == 0, r.message
    assert all(v == 0.0 for v in r.to_dict()["methods"]["forward"]["gradient"].values())
