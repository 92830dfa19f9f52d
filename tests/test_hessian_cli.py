"""``gradcli hessian`` and the new ``grad`` options through CliRunner, stdout and stderr apart."""
from __future__ import annotations

import dataclasses
import math

import pytest

from gradcli.cli import main
from gradcli.core.primitives import PRIMITIVES
from cli_helpers import PLAIN_ENV, RUNNER, strict_json


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def run(*args):
    result = RUNNER.invoke(main, list(args), env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def test_table_shows_methods_symmetry_eigenvalues_and_the_verdict():
    r = run("hessian", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3")
    assert r.exit_code == 0 and r.stderr == ""
    for text in ("∂²f/∂x∂y = 2*x*cos(y)", "forward_over_reverse", "reverse_over_forward", "central_of_reverse",
                 "asymmetry", "eigenvalues:", "definiteness: indefinite", "✓ agree"):
        assert text in r.stdout, text
    assert "∂²f/∂y∂x  " not in r.stdout  # the per-entry table only with --full
    full = run("hessian", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--full")
    assert full.exit_code == 0 and "∂²f/∂y∂x" in full.stdout and "∂²f/∂y²" in full.stdout


def _matrix_rows(stdout: str, corner: str) -> dict:
    """The rows of the boxed matrix table headed ``corner``: {row label: [numbers]}."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if corner in line)
    rows = {}
    for line in lines[start + 2:]:
        if line.startswith("└"):
            return rows
        label, *cells = [c.strip() for c in line.strip("│").split("│")]
        rows[label] = [float(c) for c in cells]
    raise AssertionError(f"{corner} table not closed")


def test_default_output_shows_the_hessian_values():
    x, y = 1.5, 0.3
    r = run("hessian", "x**2*sin(y)", "--at", f"x={x}", "--at", f"y={y}")
    assert r.exit_code == 0
    rows = _matrix_rows(r.stdout, "H (symbolic)")
    # by hand: f_xx = 2 sin y, f_xy = 2 x cos y, f_yy = -x² sin y
    expected = {"x": [2 * math.sin(y), 2 * x * math.cos(y)], "y": [2 * x * math.cos(y), -x * x * math.sin(y)]}
    assert list(rows) == ["x", "y"]
    for label, want in expected.items():
        assert rows[label] == pytest.approx(want, rel=1e-10), label
    assert max(len(line) for line in r.stdout.splitlines()) <= 80  # compact: fits a terminal
    full = run("hessian", "x**2*sin(y)", "--at", f"x={x}", "--at", f"y={y}", "--full")
    assert "H (symbolic)" not in full.stdout  # --full's table shows every method's entries instead


def test_a_vector_expression_shows_its_jacobian_values():
    x, y = 1.5, 0.3
    r = run("grad", "x*y, sin(x)*y", "--at", f"x={x}, y={y}")
    assert r.exit_code == 0
    rows = _matrix_rows(r.stdout, "J (symbolic)")
    assert list(rows) == ["f1", "f2"]
    assert rows["f1"] == pytest.approx([y, x], rel=1e-10)
    assert rows["f2"] == pytest.approx([math.cos(x) * y, math.sin(x)], rel=1e-10)
    assert "worst entry" in r.stdout  # the methods' table stays compact


@pytest.mark.parametrize("expr, point, line", [
    ("x**2*sin(y)", "x=1.5, y=0.3", "indefinite (not a critical point: the gradient is not zero)"),
    ("x**2 - y**2", "x=0, y=0", "indefinite (a saddle point)"),
    ("x**2 + y**2", "x=1, y=0", "positive definite (not a critical point: the gradient is not zero)"),
    ("x**2 + y**2", "x=0, y=0", "positive definite (a local minimum)"),
    # the float nearest pi/2 is 6e-17 off the maximum: zero within what one ulp of x moves the gradient
    ("sin(x) + sin(y)", f"x={math.pi / 2}, y={math.pi / 2}", "negative definite (a local maximum)"),
    ("x**4 + y**2", "x=0, y=0", "singular (the second-derivative test is inconclusive)"),
    ("x**4 + y**2", "x=1, y=0", "positive definite (not a critical point: the gradient is not zero)"),
])
def test_definiteness_names_the_point_only_where_the_gradient_is_zero(expr, point, line):
    r = run("hessian", expr, "--at", point)
    assert r.exit_code == 0
    assert f"definiteness: {line}\n" in r.stdout
    doc = strict_json(run("hessian", expr, "--at", point, "--json").stdout)
    critical = all(abs(g) < 1e-15 for g in doc["gradient"].values())  # independent of the renderer's rule
    assert ("not a critical point" not in line) == critical


def test_json_is_strict_and_has_the_contract_keys():
    r = run("hessian", "x**2 + y**2", "--at", "x=0, y=0", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["definiteness"] == "minimum" and doc["eigenvalues"] == [2.0, 2.0]
    assert doc["status"] == "agree" and doc["value"] == 0.0 and doc["gradient"] == {"x": 0.0, "y": 0.0}
    assert doc["methods"]["forward_over_reverse"]["hessian"] == [[2.0, 0.0], [0.0, 2.0]]
    assert doc["symmetry"]["forward_over_reverse"] == 0.0


def test_json_nulls_for_non_finite_numbers_and_exit_3():
    r = run("hessian", "x**1.5", "--at", "x=0", "--json")
    assert r.exit_code == 3 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["status"] == "undefined" and doc["definiteness"] is None and doc["eigenvalues"] is None
    assert doc["methods"]["forward_over_reverse"]["hessian"] == [[None]]
    assert doc["diagnostics"][0]["kind"] == "undefined"


def test_a_kink_is_exit_3():
    r = run("hessian", "abs(x)**3 + y**2", "--at", "x=0, y=1")
    assert r.exit_code == 3 and r.stderr == "" and "nondifferentiable" in r.stdout


def test_a_wrong_partial_is_exit_1(monkeypatch):
    sin = PRIMITIVES["sin"]
    monkeypatch.setitem(PRIMITIVES, "sin", dataclasses.replace(
        sin, partials=(lambda F, ans, x: F.cos(x) * 1.001,)))
    r = run("hessian", "sin(x)*y", "--at", "x=0.7, y=1.3", "--json")
    assert r.exit_code == 1 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["status"] == "disagree"
    assert doc["methods"]["forward_over_reverse"]["status"] == "mismatch"
    table = run("hessian", "sin(x)*y", "--at", "x=0.7, y=1.3")
    assert table.exit_code == 1 and "✗ disagree" in table.stdout


@pytest.mark.parametrize("args,message", [
    (["hessian", "x*y, x+y", "--at", "x=1, y=2"], "scalar expression"),
    (["hessian", "x*y", "--at", "x=1"], "no value for y"),
    (["hessian", "x*y", "--at", "x=1, y=2", "-m", "forward"], "unknown method 'forward'"),
    (["hessian", "x*y", "--at", "x=1, y=2", "--direction", "1"], "1 component"),
    (["hessian", "x*y", "--at", "x=1, y=2", "--direction", "x=1, 0"], "not a mix"),
    (["hessian", "x*y", "--at", "x=1, y=2", "--direction", "z=1"], "z is not a variable"),
    (["hessian", "x*y", "--at", "x=1, y=2", "--rtol", "-1"], "non-negative"),
    (["hessian", "2x", "--at", "x=1"], "did you mean 2*x?"),
    (["grad", "x*y", "--at", "x=1, y=2", "--direction", "1,2,3"], "3 component"),
    (["grad", "x*y", "--batch", "10", "--domain", "x=0:1, y=0:1", "--direction", "1,0"], "batch mode"),
])
def test_bad_input_is_exit_2_with_an_error_document(args, message):
    r = run(*args)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and message in r.stderr
    j = run(*args, "--json")
    assert j.exit_code == 2
    assert strict_json(j.stdout)["status"] == "error" and message in strict_json(j.stdout)["error"]


def test_hessian_direction():
    r = run("hessian", "x*y*z", "--at", "x=1, y=2, z=3", "--direction", "x=1", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["direction"] == {"x": 1.0, "y": 0.0, "z": 0.0}
    m = doc["methods"]["forward_over_reverse"]
    assert m["directional_derivative"] == 6.0 and m["hvp"] == [0.0, 3.0, 2.0]
    table = run("hessian", "x*y*z", "--at", "x=1, y=2, z=3", "--direction", "1, 0, 0")
    assert table.exit_code == 0 and "H·v" in table.stdout and "∇f·v" in table.stdout


def test_grad_direction_and_full():
    r = run("grad", "x*y, x+y", "--at", "x=1, y=2", "--direction", "1,3", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["methods"]["forward"]["directional_derivative"] == [5.0, 4.0]
    compact = run("grad", "x*y, x+y", "--at", "x=1, y=2")
    assert "max rel error" in compact.stdout and "worst entry" in compact.stdout
    full = run("grad", "x*y, x+y", "--at", "x=1, y=2", "--full", "--direction", "1,3")
    assert "max rel error" not in full.stdout and "J·v" in full.stdout
    scalar = run("grad", "x*y", "--at", "x=1, y=2", "--direction", "y=1")
    assert scalar.exit_code == 0 and "∇f·v" in scalar.stdout and "max rel error" not in scalar.stdout


def test_help_lists_hessian():
    r = run("--help")
    assert "hessian" in r.stdout
