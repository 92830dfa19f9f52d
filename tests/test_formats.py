"""``--format markdown|latex`` on ``gradcli grad`` and ``gradcli hessian`` (render/formats.py)."""
from __future__ import annotations

import json
import math

import pytest
import sympy

from gradcli.cli import main
from gradcli.render.formats import latex_error, latex_escape, latex_number
from cli_helpers import PLAIN_ENV, RUNNER


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
X, Y = sympy.symbols("x y", real=True)


def run(*args):
    result = RUNNER.invoke(main, list(args), env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def pipe_rows(text: str) -> list:
    """The rows of the first markdown pipe table in ``text``, as lists of cells (separator included)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        assert line.endswith("|")
        rows.append([c.strip() for c in line[1:-1].split(" | ")] if "---" not in line else line.strip("|").split("|"))
    return rows


def test_grad_markdown_is_a_table_of_methods_by_entries():
    r = run("grad", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--format", "markdown")
    assert r.exit_code == 0 and r.stderr == ""
    rows = pipe_rows(r.stdout)
    assert rows[0] == ["method", "status", "∂f/∂x", "rel. error", "∂f/∂y", "rel. error"]
    assert len(rows) == 2 + 6 and all(len(row) == 6 for row in rows)
    assert rows[2][0] == "symbolic (ref)" and [row[0] for row in rows[3:]] == [
        "forward", "reverse", "central", "richardson", "complex_step"]
    assert float(rows[3][2]) == pytest.approx(2 * 1.5 * math.sin(0.3), rel=1e-10)
    assert "- ∂f/∂x = `2*x*sin(y)`" in r.stdout and "- ∂f/∂y = `x**2*cos(y)`" in r.stdout
    assert "**✓ agree**: 6 methods agree" in r.stdout


def test_grad_markdown_vector_valued_and_selected_methods():
    r = run("grad", "x*y, x+y", "--at", "x=1, y=2", "--format", "markdown", "-m", "forward,reverse")
    assert r.exit_code == 0
    rows = pipe_rows(r.stdout)
    assert len(rows[0]) == 2 + 2 * 4 and rows[0][2] == "∂f1/∂x" and rows[0][8] == "∂f2/∂y"
    assert len(rows) == 2 + 2 and [row[0] for row in rows[2:]] == ["forward", "reverse"]


def test_grad_latex_has_a_tabular_and_sympys_latex_of_the_derivative():
    r = run("grad", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--format", "latex")
    assert r.exit_code == 0 and r.stderr == ""
    out = r.stdout
    assert "\\begin{tabular}{llrrrr}" in out and "\\end{tabular}" in out
    assert sympy.latex(sympy.diff(X ** 2 * sympy.sin(Y), X)) in out
    assert sympy.latex(sympy.diff(X ** 2 * sympy.sin(Y), Y)) in out
    assert "complex\\_step" in out and "booktabs" not in out and "\\num" not in out
    assert "\\times10^{-" in out  # errors in plain scientific notation
    body = out[out.index("\\hline\n", out.index("\\begin{tabular}")):]
    data = [line for line in body.splitlines() if line.endswith("\\\\")]
    assert len(data) == 1 + 6 and all(line.count(" & ") == 5 for line in data)


def test_hessian_formats():
    r = run("hessian", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--format", "latex")
    assert r.exit_code == 0 and r.stderr == ""
    f = X ** 2 * sympy.sin(Y)
    assert "\\begin{pmatrix}" in r.stdout and "\\begin{tabular}{llrr}" in r.stdout
    assert sympy.latex(sympy.diff(f, X, Y)) in r.stdout and sympy.latex(sympy.diff(f, Y, Y)) in r.stdout
    r = run("hessian", "x**2 - y**2", "--at", "x=0, y=0", "--format", "markdown")
    assert r.exit_code == 0
    rows = pipe_rows(r.stdout)
    assert rows[0] == ["method", "status", "max rel. error", "asymmetry"] and len(rows) == 2 + 4
    assert "| x | 2 | 0 |" in r.stdout and "| y | 0 | -2 |" in r.stdout
    assert "definiteness: **indefinite** (a saddle point)" in r.stdout and "- ∂²f/∂x∂y = `0`" in r.stdout
    r = run("hessian", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--format", "markdown")
    assert "**indefinite** (not a critical point: the gradient is not zero)" in r.stdout
    assert "saddle" not in r.stdout


@pytest.mark.parametrize("cmd", ["grad", "hessian"])
@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_exit_codes_are_unchanged(cmd, fmt):
    for expr, point in (("sqrt(x)", "x=0"), ("abs(x)*y", "x=0, y=1"), ("x**3", "x=2")):
        plain = run(cmd, expr, "--at", point)
        formatted = run(cmd, expr, "--at", point, "--format", fmt)
        assert formatted.exit_code == plain.exit_code and formatted.stderr == plain.stderr
    bad = run(cmd, "2x", "--at", "x=1", "--format", fmt)
    assert bad.exit_code == 2 and bad.stdout == "" and "did you mean 2*x?" in bad.stderr


@pytest.mark.parametrize("cmd", ["grad", "hessian"])
def test_format_and_json_exclude_each_other(cmd):
    r = run(cmd, "x*y", "--at", "x=1, y=2", "--format", "latex", "--json")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0] == "error: --format and --json exclude each other: give one"
    assert json.loads(r.stdout)["status"] == "error"
    r = run(cmd, "x*y", "--at", "x=1, y=2", "--format", "html")
    assert r.exit_code == 2 and "--format" in r.stderr


def test_format_is_not_for_batch_mode():
    r = run("grad", "x*y", "--batch", "10", "--domain", "x=0:1, y=0:1", "--format", "markdown")
    assert r.exit_code == 2 and "not in batch mode" in r.stderr


def test_latex_helpers():
    assert latex_number(1.2e-16) == "$1.2\\times10^{-16}$" and latex_number(0.5) == "$0.5$"
    assert latex_number(None) == "---" and latex_number(float("inf")) == "$\\infty$"
    assert latex_error(3.4e-17) == "$3.4\\times10^{-17}$" and latex_error(None) == "---"
    assert latex_escape("a_b & 50% #1 {x}") == "a\\_b \\& 50\\% \\#1 \\{x\\}"


def test_latex_vector_valued_and_names_with_underscores():
    r = run("grad", "x_1*y, x_1+y", "--at", "x_1=1, y=2", "--format", "latex")
    assert r.exit_code == 0
    assert "\\partial f_{1}/\\partial x_{1}" in r.stdout and "f_{2}(x_{1}, y)" in r.stdout
