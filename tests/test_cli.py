"""Every path through ``gradcli grad`` (docs/contract.md, the command line), with stdout and stderr asserted separately.

Data goes to stdout, diagnostics to stderr: each test checks both streams on their own, and that no
Traceback ever reaches the user.
"""
from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys

import click
import pytest

import gradcli
from gradcli import __version__
from gradcli.cli import COMMANDS, command_docstring, load_command, main
from gradcli.verdict.exit_codes import EXIT_CODES, exit_code
from gradcli.core.primitives import PRIMITIVES
from gradcli.verdict.report import HESSIAN_ORDER, METHOD_ORDER
from cli_helpers import PLAIN_ENV, RUNNER, strict_json

# a numpy RuntimeWarning would reach the user's stderr: make it an error that fails the test
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EXACT_METHODS = ("symbolic", "forward", "reverse", "richardson", "complex_step")
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def grad(*args, env=None):
    """``gradcli grad ARGS`` in process; an exception escaping the CLI fails the test."""
    result = RUNNER.invoke(main, ["grad", *args], env={**PLAIN_ENV, **(env or {})}, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def close(got, want, rel=1e-12):
    return got is not None and math.isclose(got, want, rel_tol=rel, abs_tol=rel)


# --- exit 0: all methods agree ------------------------------------------------------------------------

def test_table_shows_symbolic_derivatives_every_method_and_the_verdict():
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3")
    assert r.exit_code == 0
    assert r.stderr == ""
    out = r.stdout
    assert "2*x*sin(y)" in out and "x**2*cos(y)" in out
    for name in METHOD_ORDER:
        assert name in out
    assert "symbolic (ref)" in out
    assert "0.88656061998" in out and "2.1495071005" in out  # 2*1.5*sin(0.3), 1.5**2*cos(0.3)
    assert "agree" in out and "disagree" not in out
    assert not SGR.search(out)


@pytest.mark.parametrize("expr, at, point, gradient", [
    ("x**2*sin(y)", ["x=1.5, y=0.3"], {"x": 1.5, "y": 0.3},
     {"x": 3 * math.sin(0.3), "y": 2.25 * math.cos(0.3)}),
    ("x*y", ["x=1,y=2"], {"x": 1.0, "y": 2.0}, {"x": 2.0, "y": 1.0}),
    ("sin(x)", ["x=pi/4"], {"x": math.pi / 4}, {"x": math.cos(math.pi / 4)}),
    ("exp(x)", ["x=-e"], {"x": -math.e}, {"x": math.exp(-math.e)}),
    ("x**3", ["x=atan2(1, 2)"], {"x": math.atan2(1, 2)}, {"x": 3 * math.atan2(1, 2) ** 2}),
    ("x*y", ["x=atan2(1, 2), y=-2"], {"x": math.atan2(1, 2), "y": -2.0}, {"x": -2.0, "y": math.atan2(1, 2)}),
    ("x**2", ["x=-1"], {"x": -1.0}, {"x": -2.0}),
    ("x**2", ["x=-1e-3"], {"x": -1e-3}, {"x": -2e-3}),
], ids=["combined", "combined-no-space", "pi/4", "-e", "atan2-comma", "atan2-in-combined", "negative",
        "negative-exponent"])
def test_at_forms(expr, at, point, gradient):
    r = grad(expr, *[a for value in at for a in ("--at", value)], "--json")
    assert r.exit_code == 0, r.stdout
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["point"] == pytest.approx(point, rel=1e-15)
    for name in EXACT_METHODS:
        for var, want in gradient.items():
            assert close(doc["methods"][name]["gradient"][var], want), (name, var)


# --- --json ---------------------------------------------------------------------------------------------

def test_json_document_matches_the_contract():
    x, y = 1.5, 0.3
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--json")
    assert r.exit_code == 0
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert {"expression", "variables", "point", "value", "symbolic", "reference", "methods",
            "status"} <= doc.keys()
    assert doc["expression"] == "x**2*sin(y)"
    assert doc["variables"] == ["x", "y"]
    assert doc["point"] == {"x": 1.5, "y": 0.3}
    assert close(doc["value"], x ** 2 * math.sin(y))
    assert doc["symbolic"] == {"x": "2*x*sin(y)", "y": "x**2*cos(y)"}
    assert doc["reference"] == "symbolic"
    assert doc["status"] == "agree"
    assert list(doc["methods"]) == list(METHOD_ORDER)
    want = {"x": 2 * x * math.sin(y), "y": x ** 2 * math.cos(y)}
    for name, m in doc["methods"].items():
        assert {"gradient", "max_rel_error", "status"} <= m.keys()
        assert "jacobian" not in m
        assert m["status"] == "ok"
        assert set(m["gradient"]) == {"x", "y"}
        rel = 1e-8 if name == "central" else 1e-12
        for var in want:
            assert close(m["gradient"][var], want[var], rel), (name, var)
        assert 0 <= m["max_rel_error"] < rel


def test_json_variables_are_in_order_of_first_appearance():
    r = grad("y*exp(x) + x", "--at", "x=0.5", "--at", "y=2", "--json")
    doc = strict_json(r.stdout)
    assert doc["variables"] == ["y", "x"]
    assert list(doc["point"]) == ["y", "x"]
    assert list(doc["symbolic"]) == ["y", "x"]
    assert list(doc["methods"]["forward"]["gradient"]) == ["y", "x"]


def test_json_non_finite_numbers_are_null_and_strictly_parseable():
    r = grad("sqrt(x)", "--at", "x=0", "--json")
    assert r.exit_code == 3
    assert r.stderr == ""
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
    doc = strict_json(r.stdout)
    assert doc["status"] == "undefined"
    assert doc["message"]
    assert doc["value"] == 0.0
    for name, m in doc["methods"].items():
        assert m["status"] == "undefined", name
        assert m["gradient"] == {"x": None}
        assert m["max_rel_error"] is None


def test_vector_valued_expression_has_a_jacobian_with_one_row_per_output():
    r = grad("x*y, x+y", "--at", "x=1", "--at", "y=2", "--json")
    assert r.exit_code == 0
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["value"] == [2.0, 3.0]
    assert doc["symbolic"] == [{"x": "y", "y": "x"}, {"x": "1", "y": "1"}]
    for name, m in doc["methods"].items():
        assert "gradient" not in m
        rel = 1e-8 if name == "central" else 1e-12
        assert len(m["jacobian"]) == 2 and all(len(row) == 2 for row in m["jacobian"])
        for row, want_row in zip(m["jacobian"], [[2.0, 1.0], [1.0, 1.0]]):
            for got, want in zip(row, want_row):
                assert close(got, want, rel), name


def test_vector_valued_table_labels_each_output():
    r = grad("x*y, x+y", "--at", "x=1", "--at", "y=2")
    assert r.exit_code == 0
    assert r.stderr == ""
    for label in ("∂f1/∂x", "∂f1/∂y", "∂f2/∂x", "∂f2/∂y"):
        assert label in r.stdout


# --- exit 1: a disagreement -----------------------------------------------------------------------------

@pytest.fixture
def wrong_sin(monkeypatch):
    """sin's partial made wrong by ``rel`` (relative): forward and reverse mode (built from the partials)
    go wrong; the finite differences, complex step and sympy (which never read the partials) stay right."""
    def patch(rel=1e-3):
        sin = PRIMITIVES["sin"]
        monkeypatch.setitem(PRIMITIVES, "sin", dataclasses.replace(
            sin, partials=(lambda F, ans, x: F.cos(x) * (1 + rel),)))
    return patch


def test_disagreement_table(wrong_sin):
    wrong_sin(1e-3)
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3")
    assert r.exit_code == 1
    assert r.stderr == ""
    assert "✗ disagree" in r.stdout
    assert "forward: d/dy" in r.stdout and "reverse: d/dy" in r.stdout


def test_disagreement_json(wrong_sin):
    wrong_sin(1e-3)
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--json")
    assert r.exit_code == 1
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["status"] == "disagree"
    statuses = {name: m["status"] for name, m in doc["methods"].items()}
    assert statuses == {"symbolic": "ok", "forward": "mismatch", "reverse": "mismatch", "central": "ok",
                        "richardson": "ok", "complex_step": "ok"}
    assert doc["methods"]["forward"]["max_rel_error"] == pytest.approx(1e-3, rel=1e-6)
    assert "forward, reverse" in doc["message"]


@pytest.mark.parametrize("tolerance", [["--rtol", "1e-2"], ["--atol", "1"]])
def test_looser_tolerances_accept_a_small_error(wrong_sin, tolerance):
    wrong_sin(1e-3)
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--json", *tolerance)
    assert r.exit_code == 0
    assert r.stderr == ""
    assert strict_json(r.stdout)["status"] == "agree"


def test_a_tighter_rtol_catches_an_error_the_default_lets_pass(wrong_sin):
    wrong_sin(1e-12)  # below the default rtol of forward/reverse (1e-10), far above float64 rounding
    args = ("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--json")
    assert grad(*args).exit_code == 0
    r = grad(*args, "--rtol", "1e-14")
    assert r.exit_code == 1
    doc = strict_json(r.stdout)
    assert doc["methods"]["forward"]["status"] == "mismatch"
    assert doc["methods"]["reverse"]["status"] == "mismatch"
    assert doc["methods"]["complex_step"]["status"] == "ok"


def test_explicit_tolerances_are_exactly_what_the_user_asked():
    # forward and reverse are 1 ulp from the 35-digit reference here: within the default tolerance,
    # outside an explicit --rtol 1e-20 (no allowance for rounding is added to the user's own numbers)
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "-m", "forward,reverse", "--json")
    assert r.exit_code == 0
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--rtol", "1e-20", "--atol", "0",
             "-m", "symbolic,forward,reverse", "--json")
    assert r.exit_code == 1
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["methods"]["forward"]["status"] == "mismatch"
    assert 0 < doc["methods"]["forward"]["max_rel_error"] < 1e-15


def test_zero_tolerances_are_accepted():
    r = grad("x*y", "--at", "x=2", "--at", "y=3", "--rtol", "0", "--atol", "0",
             "-m", "forward,reverse,complex_step")
    assert r.exit_code == 0  # 3 and 2 are exact in float64, and so are these three methods
    assert r.stderr == ""
    r = grad("x*y", "--at", "x=2", "--at", "y=3", "--rtol", "0", "--atol", "0", "-m", "central")
    assert r.exit_code in (0, 1)  # central differences may or may not hit 3 and 2 exactly


# --- exit 2: bad input ----------------------------------------------------------------------------------

NESTED = "(" * 50_000 + "x" + ")" * 50_000
TOO_LONG = "x" + "+x" * 50_000  # 100,001 characters

# (args, text in the error line, column of the caret for expression errors or None)
BAD_INPUT = [
    pytest.param(["2x", "--at", "x=1"], "did you mean 2*x?", 2, id="2x"),
    pytest.param(["x +", "--at", "x=1"], "missing operand", 3, id="dangling-operator"),
    pytest.param(["(x+1", "--at", "x=1"], "unclosed '('", 1, id="unclosed-paren"),
    pytest.param(["x+1)", "--at", "x=1"], "unmatched ')'", 4, id="unmatched-paren"),
    pytest.param(["sine(x)", "--at", "x=1"], "did you mean sin", 1, id="unknown-function"),
    pytest.param([""], "empty expression", 1, id="empty"),
    pytest.param(["__x", "--at", "__x=1"], "reserved", 1, id="dunder"),
    pytest.param([NESTED, "--at", "x=1"], "nested deeper", 10_001, id="nested-50000"),
    pytest.param([TOO_LONG, "--at", "x=1"], "longer than 100000 characters", 100_001, id="too-long"),
    pytest.param(["x+y", "--at", "x=1"], "no value for y", None, id="missing-variable"),
    pytest.param(["x+y"], "no value for x, y", None, id="no-at"),
    pytest.param(["x", "--at", "x=1", "--at", "y=2"], "y is not a variable of the expression", None,
                 id="extra-variable"),
    pytest.param(["x", "--at", "x"], "--at expects NAME=VALUE", None, id="at-no-equals"),
    pytest.param(["x", "--at", "=1"], "--at expects NAME=VALUE", None, id="at-no-name"),
    pytest.param(["x", "--at", "x="], "--at expects NAME=VALUE", None, id="at-no-value"),
    pytest.param(["x", "--at", "x=foo("], "--at x:", None, id="at-bad-value"),
    pytest.param(["x", "--at", "x=y"], "constant expression", None, id="at-variable-value"),
    pytest.param(["x", "--at", "x=1e400"], "too large", None, id="at-overflow"),
    pytest.param(["x", "--at", "x=nan"], "--at x: nan is not a finite number", None, id="at-nan"),
    pytest.param(["x", "--at", "x=-Inf"], "--at x: Inf is not a finite number", None, id="at-inf"),
    pytest.param(["x", "--at", "1x=2"], "not a variable name", None, id="at-bad-name"),
    pytest.param(["x", "--at", "x=1", "--at", "x=2"], "x twice", None, id="duplicate-at"),
    pytest.param(["x", "--at", "x=1, x=2"], "x twice", None, id="duplicate-in-combined"),
    pytest.param(["x", "--at", "x=1", "--method", "backward"], "unknown method 'backward'", None,
                 id="unknown-method"),
    pytest.param(["x", "--at", "x=1", "-m", "forward,foo"], "unknown method 'foo'", None,
                 id="unknown-method-in-list"),
    pytest.param(["-m", "--at", "m=2"], "-m/--method needs a method name, got the option '--at'", None,
                 id="method-took-the-next-option"),
    pytest.param(["x", "--at", "x=1", "--rtol", "-1"], "non-negative", None, id="negative-rtol"),
    pytest.param(["x", "--at", "x=1", "--atol", "-1e-9"], "non-negative", None, id="negative-atol"),
    pytest.param(["x", "--at", "x=1", "--rtol", "nan"], "non-negative", None, id="nan-rtol"),
    pytest.param(["x", "--at", "x=1", "--timeout", "-1"], "--timeout", None, id="negative-timeout"),
    pytest.param(["x", "--at", "x=1", "--timeout", "inf"], "--timeout", None, id="infinite-timeout"),
]


@pytest.mark.parametrize("args, message, column", BAD_INPUT)
def test_bad_input_is_one_error_line_and_exit_2(args, message, column):
    r = grad(*args)
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("error: ")
    assert message in lines[0]
    if column is None:
        assert len(lines) == 1, r.stderr
    else:  # the expression (or the window of it around the column) and a caret under the column
        assert f"(column {column})" in lines[0]
        assert len(lines) == 3, r.stderr
        assert lines[2].strip() == "^"
        if args[0] == lines[1]:  # short enough to be shown whole
            assert lines[2].index("^") == column - 1


@pytest.mark.parametrize("args, message, column", BAD_INPUT)
def test_bad_input_with_json_is_an_error_document(args, message, column):
    r = grad(*args, "--json")
    assert r.exit_code == 2
    doc = strict_json(r.stdout)
    assert doc["status"] == "error"
    assert message in doc["error"]
    assert doc.get("column") == column
    # stderr still says it, for the human watching the pipeline
    assert r.stderr.splitlines()[0] == f"error: {doc['error']}"


@pytest.mark.parametrize("args, message", [
    (["x", "--at", "x=1", "--rtol", "abc"], "'abc' is not a valid float"),
    (["x", "--at", "x=1", "--bogus"], "No such option '--bogus'"),
    ([], "Missing argument 'EXPR'"),
], ids=["rtol-not-a-number", "unknown-option", "missing-expr"])
def test_usage_errors_from_click(args, message):
    r = grad(*args)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert message in r.stderr and "Usage:" in r.stderr

    r = grad(*args, "--json")
    assert r.exit_code == 2
    doc = strict_json(r.stdout)
    assert doc["status"] == "error" and message in doc["error"]


# --- exit 3: undefined or not differentiable ------------------------------------------------------------

@pytest.mark.parametrize("expr, x, status, value", [
    ("abs(x)", "0", "nondifferentiable", 0.0),
    ("log(x)", "-1", "undefined", None),
    ("sqrt(x)", "0", "undefined", 0.0),
])
def test_no_derivative_at_the_point(expr, x, status, value):
    r = grad(expr, "--at", f"x={x}")
    assert r.exit_code == 3
    assert r.stderr == ""
    out_lines = r.stdout.splitlines()
    assert out_lines[-1].startswith(f"! {status}: ")
    row = next(line for line in out_lines if "∂f/∂x │" in line)  # the table row, not the derivative line
    assert not re.search(r"\d", row.replace("∂f/∂x", "")), row  # no confident number anywhere in it

    r = grad(expr, "--at", f"x={x}", "--json")
    assert r.exit_code == 3
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["status"] == status
    assert doc["value"] == value
    assert doc["diagnostics"] and doc["diagnostics"][0]["kind"] == status
    for m in doc["methods"].values():
        assert m["gradient"] == {"x": None}
        assert m["status"] in ("undefined", "unavailable")


def test_a_kink_in_one_variable_leaves_the_others():
    r = grad("abs(x) + 3*y", "--at", "x=0, y=2", "--json")
    assert r.exit_code == 3
    doc = strict_json(r.stdout)
    assert doc["status"] == "nondifferentiable"
    assert doc["methods"]["forward"]["gradient"] == {"x": None, "y": 3.0}
    assert doc["methods"]["complex_step"]["status"] == "unavailable"  # not through abs


def test_overflow_is_undefined_without_numpy_warnings():
    r = grad("exp(x)", "--at", "x=1000")
    assert r.exit_code == 3
    assert r.stderr == ""  # no RuntimeWarning (pytestmark turns one into a failure, too)
    assert "overflow" in r.stdout


# --- warnings -------------------------------------------------------------------------------------------

def test_a_lone_variable_named_like_a_call_warns_on_stderr():
    r = grad("sinx", "--at", "sinx=1")
    assert r.exit_code == 0
    assert r.stderr == "warning: sinx is a variable; did you mean sin(x)?\n"
    assert "∂f/∂sinx" in r.stdout and "agree" in r.stdout


def test_the_warning_keeps_json_stdout_pure():
    r = grad("sinx", "--at", "sinx=1", "--json")
    assert r.exit_code == 0
    assert "sin(x)" in r.stderr
    doc = strict_json(r.stdout)
    assert doc["status"] == "agree"
    assert any("sin(x)" in w for w in doc["warnings"])


# --- method selection -----------------------------------------------------------------------------------

@pytest.mark.parametrize("options, methods", [
    (["--method", "forward,reverse"], ["forward", "reverse"]),
    (["-m", "forward", "-m", "central"], ["forward", "central"]),
    (["-m", "central,forward"], ["forward", "central"]),  # always the canonical order
    (["-m", "Complex-Step"], ["complex_step"]),
    (["-m", "all"], list(METHOD_ORDER)),
])
def test_method_selection(options, methods):
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", *options, "--json")
    assert r.exit_code == 0
    assert r.stderr == ""
    doc = strict_json(r.stdout)
    assert list(doc["methods"]) == methods
    # no symbolic method, no sympy: forward and reverse agreeing are the reference
    assert doc["reference"] == ("symbolic" if "symbolic" in methods else "consensus")
    assert (doc["symbolic"] is None) == ("symbolic" not in methods)

    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", *options)
    header = next(line for line in r.stdout.splitlines() if "┃" in line and any(m in line for m in methods))
    assert [c.strip().removesuffix(" (ref)") for c in header.split("┃") if c.strip()] == methods


# --- help, version, colour ------------------------------------------------------------------------------

def test_version():
    r = RUNNER.invoke(main, ["--version"])
    assert r.exit_code == 0
    assert r.stdout == f"gradcli, version {__version__}\n"
    assert r.stderr == ""


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["grad", "--help"]])
def test_help_shows_examples_and_exit_codes(args):
    r = RUNNER.invoke(main, args)
    assert r.exit_code == 0
    assert r.stderr == ""
    assert "Examples:" in r.stdout and 'gradcli grad "x**2*sin(y)" --at x=1.5' in r.stdout
    assert "Exit codes" in r.stdout
    assert "2 bad input" in r.stdout


def test_grad_help_lists_every_option():
    r = RUNNER.invoke(main, ["grad", "--help"])
    for option in ("--at", "--method", "--rtol", "--atol", "--timeout", "--json"):
        assert option in r.stdout


def test_no_escape_codes_when_not_a_terminal():
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3")
    assert "\x1b" not in r.stdout and "\x1b" not in r.stderr


def test_no_color():
    r = grad("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", env={"NO_COLOR": "1"})
    assert r.exit_code == 0
    assert "\x1b" not in r.stdout and "\x1b" not in r.stderr
    r = grad("sinx", "--at", "sinx=1", env={"NO_COLOR": "1"})
    assert "\x1b" not in r.stdout and "\x1b" not in r.stderr


def _colour_codes(text: str) -> list[str]:
    """SGR parameters that set a foreground or background colour (30-49, 90-107)."""
    return [p for params in SGR.findall(text) for p in params.split(";")
            if p and (30 <= int(p) <= 49 or 90 <= int(p) <= 107)]


def test_no_color_wins_over_a_forced_terminal():
    args = ("x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3")
    forced = grad(*args, env={"FORCE_COLOR": "1"})
    assert _colour_codes(forced.stdout)  # the check below can see colour when there is some
    plain = grad(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 0
    assert not _colour_codes(plain.stdout)


def test_python_dash_m():
    p = subprocess.run([sys.executable, "-m", "gradcli", "--version"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0
    assert p.stdout == f"gradcli, version {__version__}\n"
    assert p.stderr == ""


# ---- lazy start-up ---------------------------------------------------------------------------------

def _modules_after(*args) -> set:
    """The modules a fresh ``gradcli ARGS`` process ends with (read from ``sys.modules`` at exit)."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: sys.__stderr__.write('\\nMODULES ' + ' '.join(sys.modules) + '\\n'))\n"
            "from gradcli.cli import main\n"
            f"main({list(args)!r}, prog_name='gradcli')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    line = [x for x in p.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(line.split()[1:])


def test_help_loads_neither_numpy_nor_sympy_nor_any_command():
    loaded = _modules_after("--help")
    assert "click" in loaded and "gradcli.cli" in loaded  # the probe sees what was imported
    assert not {"numpy", "sympy", "rich"} & loaded
    assert not [m for m in loaded if m.startswith("gradcli.cli.")]


def test_a_command_is_imported_only_when_it_runs():
    loaded = _modules_after("grad", "x**2", "--at", "x=1", "--method", "forward", "--json")
    assert "gradcli.cli.grad" in loaded and "numpy" in loaded
    assert "gradcli.cli.check" not in loaded and "gradcli.cli.plot" not in loaded
    # a point never loads batch mode's engines (compiler, threads, CUDA source)
    assert not [m for m in loaded if m.startswith("gradcli.batch")]


def test_forward_and_reverse_alone_never_import_sympy():
    loaded = _modules_after("grad", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3",
                            "--method", "forward,reverse")
    assert "numpy" in loaded
    assert "sympy" not in loaded


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_command_list_shows_each_command_own_short_help(width):
    for name in COMMANDS:
        real = load_command(name)
        assert real.name == name
        lazy = click.Command(name, help=command_docstring(name))
        assert lazy.get_short_help_str(width) == real.get_short_help_str(width) != ""


def test_the_package_api_is_loaded_on_first_use():
    assert gradcli.grad is gradcli.api.grad and gradcli.BadInput.__name__ == "BadInput"
    assert set(gradcli.__all__) <= set(dir(gradcli))
    with pytest.raises(AttributeError):
        gradcli.no_such_name
    code = "import sys, gradcli; print('numpy' in sys.modules, 'sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---- one exit-code table ----------------------------------------------------------------------------

def test_one_exit_code_table_for_every_command():
    assert [exit_code(s) for s in ("agree", "disagree", "undefined", "nondifferentiable", "ill_conditioned")] \
        == [0, 1, 3, 3, 3]
    assert [exit_code(s) for s in ("pass", "skipped", "fail", "error", "inconclusive")] == [0, 0, 1, 1, 1]
    assert exit_code("pass", "undefined") == 3 and exit_code("undefined", "fail") == 1
    assert exit_code("fail", "bad_input") == 2 and exit_code() == 0
    assert exit_code("no verdict yet") == 3  # an unknown status is never a pass
    assert set(EXIT_CODES.values()) == {0, 1, 2, 3}


def test_reports_take_their_exit_code_from_the_table():
    r = gradcli.grad("sqrt(x)", x=0.0)
    assert (r.status, r.exit_code) == ("undefined", 3)
    assert gradcli.hessian("x**2 - y**2", x=0.0, y=0.0).exit_code == 0
    b = gradcli.grad_batch("log(x)", n=50, domain={"x": (-1, -0.5)})
    assert (b.status, b.exit_code) == ("undefined", 3)


# --- hints for the first mistakes ----------------------------------------------------------------------

@pytest.mark.parametrize("args, line", [
    (["x**2", "--at", "X=1"], "error: no value for x: pass --at x=VALUE (did you mean --at x=1? names are "
                              "case-sensitive); X is not a variable of the expression"),
    (["x**2", "--at", "X=0.25"], "error: no value for x: pass --at x=VALUE (did you mean --at x=0.25? names are "
                                 "case-sensitive); X is not a variable of the expression"),
    (["alpha*x", "--at", "x=1", "--at", "alpah=2"], "error: no value for alpha: pass --at alpha=VALUE (did you "
                                                     "mean --at alpha=2?); alpah is not a variable of the expression"),
    (["x*y", "--at", "x=1", "--at", "z=2"], "error: no value for y: pass --at y=VALUE; z is not a variable of "
                                            "the expression"),
])
def test_a_value_given_under_another_name_is_named(args, line):
    r = grad(*args)
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", line + "\n")


@pytest.mark.parametrize("command, args, hint", [
    ("grad", ["x**2", "x=1"], "Values go after --at: --at x=1"),
    ("hessian", ["x*y", "x=1", "y=2"], "Values go after --at: --at x=1 --at y=2"),
    ("explain", ["x*y", "--at", "x=1", "y=2"], "Values go after --at: --at y=2"),
    ("grad", ["x", "--at", "x=1", "y = 2"], "Values go after --at: --at 'y = 2'"),
])
def test_a_value_given_as_an_argument_points_to_at(command, args, hint):
    r = RUNNER.invoke(main, [command, *args], env=PLAIN_ENV)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-2].startswith("Error: Got unexpected extra argument")
    assert r.stderr.splitlines()[-1] == hint


def test_an_extra_argument_that_is_no_value_gets_no_at_hint():
    r = RUNNER.invoke(main, ["grad", "x**2", "foo"], env=PLAIN_ENV)
    assert r.exit_code == 2 and r.stderr.splitlines()[-1] == "Error: Got unexpected extra argument (foo)"


@pytest.mark.parametrize("typed, meant", [("gard", "'grad'"), ("Grad", "'grad'"), ("hesian", "'hessian'"),
                                          ("chek", "'check'"), ("stpes", "'steps'"), ("explian", "'explain'")])
def test_a_mistyped_command_gets_the_closest_name(typed, meant):
    r = RUNNER.invoke(main, [typed, "x"], env=PLAIN_ENV)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == f"Error: No such command {typed!r}. Did you mean {meant}?"


def test_an_unknown_command_with_nothing_close_is_only_named():
    r = RUNNER.invoke(main, ["xyzzy"], env=PLAIN_ENV)
    assert r.exit_code == 2 and r.stderr.splitlines()[-1] == "Error: No such command 'xyzzy'."


@pytest.mark.parametrize("command, at", [("grad", "x=[1,2,3]"), ("grad", "x=[1, 2], y=2"), ("hessian", "x=[0.5]"),
                                         ("explain", "x = [1,2]")])
def test_an_array_value_is_refused_in_one_line(command, at):
    r = RUNNER.invoke(main, [command, "x*y", "--at", at, "--at", "y=2"] if "y=" not in at else
                      [command, "x*y", "--at", at], env=PLAIN_ENV)
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == ("error: --at x: array values are not supported; gradcli differentiates at one point "
                        "(for many points: gradcli grad --points FILE, one row per point, or --batch N --domain)\n")


def test_a_direction_in_brackets_is_refused_in_one_line():
    r = grad("x*y", "--at", "x=1, y=2", "--direction", "[1,0]")
    assert (r.exit_code, r.stderr) == (2, 'error: --direction takes the components without brackets, such as "1,0"\n')
    r = grad("x*y", "--at", "x=1, y=2", "--direction", "x=[1,0]")
    assert (r.exit_code, r.stderr) == (2, "error: --direction x: array values are not supported; a variable is "
                                          "one number\n")


def _completions(args, incomplete):
    from click.shell_completion import ShellComplete

    return [c.value for c in ShellComplete(main, {}, "gradcli", "_GRADCLI_COMPLETE").get_completions(args, incomplete)]


@pytest.mark.parametrize("command, order", [("grad", METHOD_ORDER), ("hessian", HESSIAN_ORDER)])
def test_method_values_complete_in_the_shell(command, order):
    # every method the command accepts, and nothing else: the option's own list is the report's order
    for option in ("-m", "--method"):
        assert _completions([command, "x", option], "") == list(order)
    assert _completions([command, "x", "-m"], "s") == [m for m in order if m.startswith("s")]
    assert _completions([command, "x", "-m"], "zz") == []


def test_a_method_list_completes_its_last_item():
    assert _completions(["grad", "x", "-m"], "forward,r") == ["forward,reverse", "forward,richardson"]
    # a method already in the list is not offered again; the typed items are kept as typed
    assert _completions(["grad", "x", "--method"], "Forward,reverse,") == [
        f"Forward,reverse,{m}" for m in METHOD_ORDER if m not in ("forward", "reverse")]
    assert _completions(["grad", "x", "-m"], "central,complex-") == ["central,complex_step"]
