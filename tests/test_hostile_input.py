"""Hostile input to the point commands (grad, hessian, explain), the compiler and the Python API: no hang,
no crash, no Python traceback, no control character echoed raw, no numpy warning on stderr.

Every expected value comes from outside gradcli (math, mpmath-free closed forms, the exact rationals of
fractions); the only time bounds are generous "does not hang" limits on subprocesses.
"""
from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

import gradcli
from gradcli.cli import main
from gradcli.core.graph import MAX_EXACT_DIGITS, Const
from gradcli.core.parser import ParseError, parse
from gradcli.render.json import dumps
from cli_helpers import PLAIN_ENV, RUNNER, strict_json

#: far above what any of these takes (a second or a few): only a hang reaches it
HANG = 120


def cli(*args):
    return RUNNER.invoke(main, list(args), env=PLAIN_ENV)


def subprocess_cli(*args, timeout=HANG, **env):
    """The real command in a process of its own, so that a hang is a timeout, not a stuck test run."""
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", **env})


def no_traceback(r):
    assert "Traceback" not in r.stderr, r.stderr


# --- 1. hangs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("literal", ["1e-10000000", "1e-99999999999"])
def test_an_astronomical_literal_is_its_float_and_sympy_says_why_it_cannot(literal):
    r = subprocess_cli("grad", f"{literal}*x", "--at", "x=1", "--timeout", "1", "--json")
    no_traceback(r)
    assert r.returncode == 0, r.stderr
    doc = strict_json(r.stdout)
    assert doc["methods"]["symbolic"]["status"] == "unavailable"
    assert literal in doc["methods"]["symbolic"]["message"]
    assert f"{MAX_EXACT_DIGITS} digits" in doc["methods"]["symbolic"]["message"]
    # what float64 makes of the literal, which every other method uses
    assert doc["methods"]["forward"]["gradient"]["x"] == float(literal) == 0.0


@pytest.mark.parametrize("text, exact", [
    ("0.1", Fraction(1, 10)), ("2", Fraction(2)), ("-0.5", Fraction(-1, 2)), (".5", Fraction(1, 2)),
    ("5.", Fraction(5)), ("12.50e+2", Fraction(1250)), ("1e-05", Fraction(1, 100_000)),
    ("1e-400", Fraction(1, 10 ** 400)), ("1e-" + "0" * 5000 + "5", Fraction(1, 100_000)), ("0.000", Fraction(0)),
    ("1" + "0" * 990, Fraction(10 ** 990)), ("1" + "0" * 1100 + "e-1100", Fraction(1)),
])
def test_exact_constants_are_the_decimal_written(text, exact):
    assert Const(float(text), text).exact() == exact
    assert Const(float(text), text).inexact_reason() == ""


@pytest.mark.parametrize("text", ["1e-10000000", "1e-99999999999", "0." + "0" * 5000 + "1", "1e" + "9" * 5000,
                                  "1" * 600 + "e-" + "9" * 700])
def test_a_constant_beyond_the_digit_budget_has_no_exact_value_and_a_reason(text):
    c = Const(float(text), text)
    assert c.exact() is None
    assert "no exact value" in c.inexact_reason()


def test_a_folded_non_finite_constant_has_no_exact_value():
    assert Const(math.inf, "inf").exact() is None and "not a finite number" in Const(math.inf, "inf").inexact_reason()
    assert Const(math.pi, "pi").exact() == "pi"


def _explain_text(n: int) -> str:
    from gradcli.api import prepare
    from gradcli.explain import explain
    from gradcli.render.explain import render_explanation
    from gradcli.render.screen import Screen

    expr = "*".join(["x"] * n)
    graph, point, _ = prepare(expr, {"x": 1.0})
    with np.errstate(all="ignore"):
        ex = explain(graph, point, cap=None, expression=expr, timeout=5)
    out = io.StringIO()
    Screen(out, width=100, color=False).print(render_explanation(ex))
    return out.getvalue()


def test_explain_all_output_grows_linearly_with_a_deep_chain():
    # the tree of x*x*...*x is as deep as it is long: indenting every level made its text quadratic
    small, large = _explain_text(500), _explain_text(2000)
    assert len(large) < 4.6 * len(small)
    tree = [line for line in large.splitlines() if "[depth " in line]
    assert len(tree) > 3000 and max(len(line) for line in tree) < 120  # indented 16 levels at most
    assert "[depth 1999] v0 = x" in large  # the deepest row still says where it is


def test_explain_all_of_8000_factors_does_not_hang():
    expr = "*".join(["x"] * 8000)
    r = subprocess_cli("explain", expr, "--at", "x=1.0001", "--all", "--json")
    no_traceback(r)
    assert r.returncode == 0
    doc = strict_json(r.stdout)
    assert len(doc["wengert"]) == 8000 and not doc["capped"]
    assert doc["symbolic"]["derivatives"]["x"] == "8000*x**7999"
    assert doc["directional_derivative"] == pytest.approx(8000 * 1.0001 ** 7999, rel=1e-9)


def test_hessian_of_many_variables_is_bounded_by_the_timeout_and_right():
    n = 200
    expr = " + ".join(f"x{i}*x{i + 1}" for i in range(n - 1))
    at = ", ".join(f"x{i}={1 + i / n!r}" for i in range(n))
    r = subprocess_cli("hessian", expr, "--at", at, "--timeout", "1", "--json")
    no_traceback(r)
    doc = strict_json(r.stdout)
    assert r.returncode == 0, doc.get("message")
    want = np.zeros((n, n))
    for i in range(n - 1):
        want[i, i + 1] = want[i + 1, i] = 1.0
    for name in ("forward_over_reverse", "reverse_over_forward", "central_of_reverse"):
        assert doc["methods"][name]["status"] == "ok", name
        np.testing.assert_allclose(doc["methods"][name]["hessian"], want, rtol=0, atol=1e-6, err_msg=name)
    if doc["methods"]["symbolic"]["status"] == "unavailable":
        assert "within 1 s" in doc["methods"]["symbolic"]["message"]


def test_a_hessian_row_meeting_an_infinite_partial_is_not_spoilt_by_the_other_rows():
    # d2/dx2 (x * acos(z) + x*x) = 2 and d2/dxdz = -1/sqrt(1 - z**2), infinite at z = -1: the rows run
    # side by side, and row x must not pick up inf * 0 = nan from row z's tangents
    from gradcli.methods import hessian as hm

    r = hm.reverse_over_forward(parse("x*acos(z) + x*x"), {"x": 1.0, "z": -1.0})
    assert r.hessian[0, 0] == 2.0 and r.hessian[0, 1] == -math.inf
    assert r.gradient[0] == pytest.approx(math.pi + 2.0, rel=1e-15)


def test_vectorised_second_order_routes_match_the_closed_form():
    from gradcli.methods import hessian as hm

    x, y, z = 0.3, 2.0, -0.7
    g = parse("x*y*z + exp(x*z) - log(y)")
    e = math.exp(x * z)
    want = np.array([[z * z * e, z, y + e + x * z * e], [z, 1 / y ** 2, x], [y + e + x * z * e, x, x * x * e]])
    point = {"x": x, "y": y, "z": z}
    np.testing.assert_allclose(hm.forward_over_forward(g, point), want, rtol=1e-14)
    np.testing.assert_allclose(hm.reverse_over_forward(g, point).hessian, want, rtol=1e-14)


# --- 2. crashes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, want", [("erf", math.erf(0.5)), ("erfc", math.erfc(0.5)),
                                      ("sigmoid", 1 / (1 + math.exp(-0.5)))])
def test_explain_json_of_a_function_numpy_returns_as_a_0d_array(fn, want):
    r = cli("explain", f"{fn}(x)", "--at", "x=0.5", "--json")
    assert r.exit_code == 0, r.stderr
    doc = strict_json(r.stdout)
    assert doc["value"] == pytest.approx(want, rel=1e-15)
    assert doc["wengert"][-1]["value"] == pytest.approx(want, rel=1e-15)


def test_the_json_encoder_takes_numpy_numbers_and_arrays():
    doc = json.loads(dumps({"a": np.array(0.25), "b": np.float32(2), "c": np.arange(3), "d": np.array([1.0, np.inf]),
                            "e": np.array(np.nan), "f": np.bool_(True)}))
    assert doc == {"a": 0.25, "b": 2.0, "c": [0, 1, 2], "d": [1.0, None], "e": None, "f": True}
    with pytest.raises(TypeError):
        dumps({"z": np.complex128(1j)})


def test_an_internal_sympy_error_makes_the_symbolic_method_unavailable(monkeypatch):
    import sympy

    def broken(self, *args, **kwargs):
        raise AttributeError("'LazyExceptionMessage' object has no attribute 'startswith'")

    monkeypatch.setattr(sympy.Expr, "evalf", broken)
    r = gradcli.grad("sin(x)*y", x=1.0, y=2.0, timeout=5)
    sym = r.methods["symbolic"]
    assert sym.status == "unavailable" and "AttributeError" in sym.message and "sympy" in sym.message
    assert r.status == "agree" and r.reference == "consensus"
    assert r.gradient["x"] == pytest.approx(2 * math.cos(1.0), rel=1e-15)


def test_hypot_with_a_pole_and_a_huge_term_is_a_verdict_not_a_crash():
    r = cli("grad", "hypot(t, atan(1/w) + z)", "--at", "t=1, w=0, z=4e156")
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 3  # atan(1/w) at w = 0 divides by zero
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("expr", ["x/0", "x/(1-1)", "x/1e-400", "log(x, 1)"])
def test_compiling_a_division_by_a_constant_zero_is_bad_input(expr):
    with pytest.raises(gradcli.BadInput, match="divides by a constant that is 0"):
        gradcli.compile(expr)


def test_a_constant_beyond_float64_compiles_to_inf():
    value, grad = gradcli.compile("x*10**400").value_and_grad(x=[1.0, 2.0])
    assert np.isposinf(value).all() and np.isposinf(grad["x"]).all()


def test_sympy_numbers_beyond_float64_become_inf_in_the_batch_reference():
    import sympy
    from gradcli.methods.sym_graph import to_graph
    from gradcli.core.graph import evaluate

    X = sympy.Symbol("x", real=True)
    g = to_graph([sympy.Integer(10) ** 400 * X, -sympy.Integer(10) ** 400 + X, sympy.Rational(1, 10 ** 400) * X],
                 ["x"], {"x": X})
    with np.errstate(all="ignore"):
        big, minus, tiny = evaluate(g, {"x": np.array([1.0])})
    assert np.isposinf(big).all() and np.isneginf(minus).all() and (tiny == 0.0).all()


def test_batch_mode_of_a_constant_beyond_float64_is_undefined_not_a_crash():
    r = cli("grad", "x*10**400", "--batch", "100", "--domain", "x=0:1", "--json")
    assert r.exit_code == 3, r.stderr
    assert strict_json(r.stdout)["status"] == "undefined"


@pytest.mark.parametrize("expr", ["x/0", "x/1e-400"])
def test_batch_mode_of_a_division_by_a_constant_zero_is_exit_2_or_3(expr):
    r = cli("grad", expr, "--batch", "100", "--domain", "x=0:1")
    assert r.exit_code in (2, 3) and (r.exception is None or isinstance(r.exception, SystemExit))


@pytest.mark.parametrize("expr", ["x/(1-1)", "1/(0*x)", "x/(1-1)**2", "x/(2-2)+x"])
def test_batch_mode_of_a_division_by_a_folded_zero_is_undefined(expr):
    # the compiler folds 1-1 (or 0*x) to 0 and the partial rules then divide by it: float64's 1/0 is inf,
    # a Python float's is a ZeroDivisionError; the derivative 1/0 does not exist at any point
    r = cli("grad", expr, "--batch", "10", "--domain", "x=0:1", "--json")
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 3, r.stderr
    assert strict_json(r.stdout)["status"] == "undefined"


# --- 3. what error lines echo, and expressions that start with '-' ---------------------------------------

@pytest.mark.parametrize("text, column", [("x+\x1b[31m", 3), ("x +\u202e y", 4), ("\x07x", 1), ("x\t+ \x1b", 5)])
def test_a_parse_error_shows_control_characters_escaped_with_the_caret_under_them(text, column):
    r = cli("grad", text, "--at", "x=1, y=1")
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 3 and f"(column {column})" in lines[0]
    assert all(c.isprintable() for line in lines for c in line), r.stderr
    bad = text[column - 1]
    shown = bad.encode("unicode_escape").decode()
    # the caret sits under the escape of the character the column names
    assert lines[1][lines[2].index("^"):].startswith(shown)


def test_a_parse_error_message_and_hint_never_carry_a_control_character():
    err = ParseError("missing operator before 'y\x1b'", 2, "x\x1by", hint="did you mean x\x0b*y?")
    assert err.message.isprintable() and err.hint.isprintable() and err.one_line().isprintable()
    assert err.caret().splitlines()[0] == "x\\x1by"


def test_explain_shows_an_input_exactly():
    r = cli("explain", "x**(10**100)", "--at", "x=1.0000000000000002")
    assert r.exit_code == 3
    step = next(line for line in r.stdout.splitlines() if "x (input)" in line)
    assert "1.0000000000000002" in step


def test_no_report_shows_a_base_just_above_1_as_1():
    r = cli("grad", "x**(10**100)", "--at", "x=1.0000001", "--timeout", "1")
    assert "pow(1," not in r.stdout + r.stderr


@pytest.mark.parametrize("args, want", [
    (["grad", "--", "-h", "--at", "h=2", "--json"], -1.0),
    (["grad", "-h", "--at", "h=2", "--json"], -1.0),  # a first -h with its point is the expression
    (["grad", "-x**2", "--at", "x=3", "--json"], -6.0),
    (["grad", "--at", "x=3", "--json", "-x**2"], -6.0),
    (["grad", "-1/x", "--rtol", "1e-3", "--at", "x=2", "--json"], 0.25),
    (["grad", "--at", "x=3", "--json", "--", "-x"], -1.0),
])
def test_an_expression_that_starts_with_a_minus(args, want):
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    doc = strict_json(r.stdout)
    assert doc["expression"] == next(a for a in args if a.startswith("-") and a not in ("--", "--at", "--json", "--rtol"))
    assert list(doc["methods"]["forward"]["gradient"].values())[0] == pytest.approx(want, rel=1e-15)


def test_minus_expressions_in_hessian_and_explain():
    r = cli("hessian", "--", "-h**2", "--at", "h=1", "--json")
    assert r.exit_code == 0 and strict_json(r.stdout)["methods"]["forward_over_reverse"]["hessian"] == [[-2.0]]
    r = cli("explain", "-x*y", "--at", "x=1, y=2", "--json")
    assert r.exit_code == 0 and strict_json(r.stdout)["reverse"][0]["gradient"] == {"x": -2.0, "y": -1.0}


def test_h_alone_is_still_help_and_a_negative_option_value_is_still_a_value():
    r = cli("grad", "-h")
    assert r.exit_code == 0 and r.stdout.startswith("Usage:") and "-- -h" in r.stdout
    r = cli("grad", "x", "--at", "x=1", "-h")  # -h after the expression asks for help
    assert r.exit_code == 0 and r.stdout.startswith("Usage:")
    r = cli("grad", "x", "--at", "x=1", "--rtol", "-1")
    assert r.exit_code == 2 and "rtol" in r.stderr and "non-negative" in r.stderr
    r = cli("grad", "x", "-y", "--at", "x=1")
    assert r.exit_code == 2 and "-y" in r.stderr


# --- 5. numpy's warnings -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["grad", "log(x)", "--at", "x=-1"], ["grad", "1/x", "--at", "x=0", "--direction", "1"],
    ["grad", "exp(x)*y", "--at", "x=800, y=1e-320"], ["grad", "x**y", "--at", "x=-1, y=0.5", "-m", "complex_step"],
    ["hessian", "sqrt(x)*y", "--at", "x=0, y=1"], ["hessian", "x*acos(z)", "--at", "x=1, z=-1"],
    ["explain", "tan(x)/x", "--at", "x=0", "--json"],
])
def test_no_numpy_warning_reaches_stderr(args):
    r = subprocess_cli(*args, PYTHONWARNINGS="always")
    no_traceback(r)
    assert r.returncode in (0, 1, 3)
    assert "Warning" not in r.stderr, r.stderr


def test_the_differences_code_is_quiet_without_the_callers_errstate():
    from gradcli.methods import differences as d

    eps = np.finfo(np.float64).eps
    g = parse("exp(x)")
    x = np.array([[800.0]])

    def rows(deltas, signs=None):
        with np.errstate(all="ignore"):
            return np.exp(x[0] + deltas[:, 0])[None, :, None, :]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d.rounding_scale(g, {"x": np.float64(800.0)})
        D1, est, hs, _ = d.central_candidates(np, x, rows, eps)
        d.richardson(np, x, lambda dl, idx=None: rows(dl), D1[0], est[0], hs[0], eps)
        d.representable(np.array([1e308]), np.array([1e308]))
