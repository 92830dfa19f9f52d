"""``gradcli plot`` and ``gradcli steps``: the data behind each picture (points, gaps, slopes, the chosen
step), the saved files (valid PNG and SVG, written atomically), the missing plot extra, and every CLI
path through CliRunner with stdout and stderr asserted apart."""
from __future__ import annotations

import json
import math
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from gradcli.cli import main
from gradcli.core.parser import parse
from gradcli.plotting.data import branch_slopes, plot_data, segments, step_data
from cli_helpers import RUNNER


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
EPS = np.finfo(np.float64).eps
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLAIN_ENV = {"FORCE_COLOR": None, "NO_COLOR": None, "COLUMNS": "100", "LINES": "32"}


def run(*args):
    result = RUNNER.invoke(main, list(args), env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def strict_json(text: str):
    def reject(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=reject)


# --- plot data ----------------------------------------------------------------------------------------

def test_sin_derivative_is_cos_on_the_whole_range():
    d = plot_data(parse("sin(x)"), "x", -3, 3, {}, n=400)
    assert d.x.shape == (400,) and d.x[0] == -3 and d.x[-1] == 3
    np.testing.assert_allclose(d.f[0], np.sin(d.x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.df[0], np.cos(d.x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.symbolic_df[0], np.cos(d.x), rtol=0, atol=1e-12)
    assert d.derivative_text == ["cos(x)"]
    assert d.f_breaks == [[]] and d.df_breaks == [[]]


def test_log_is_a_gap_where_x_is_not_positive():
    d = plot_data(parse("log(x)"), "x", -1, 1, {}, n=401)
    neg = d.x <= 0
    assert np.isnan(d.f[0][neg]).all() and np.isnan(d.df[0][neg]).all()
    assert np.isfinite(d.f[0][~neg]).all()
    np.testing.assert_allclose(d.df[0][~neg], 1 / d.x[~neg], rtol=1e-14)
    pieces = segments(d.x, d.f[0], d.f_breaks[0])
    assert len(pieces) == 1 and pieces[0][0][0] > 0


def test_other_variables_are_fixed():
    d = plot_data(parse("x*exp(-x*y)"), "x", 0, 4, {"y": 0.5}, n=50)
    np.testing.assert_allclose(d.df[0], np.exp(-0.5 * d.x) * (1 - 0.5 * d.x), rtol=1e-13)
    assert d.fixed == {"y": 0.5}


@pytest.mark.parametrize("expr, f_breaks, df_breaks", [
    ("1/x", [199], [199]),          # a pole breaks the function and its derivative
    ("tan(x)", [95, 303], [95, 303]),
    ("sign(x)", [199], []),         # a jump: the function; its derivative is 0 on both sides
    ("abs(x)", [], [199]),          # a kink: only the derivative
    ("max(x, 0.5*x)", [], [199]),
    ("abs(x)**2", [], []),          # crosses abs's kink, yet its derivative 2|x|sign(x) is continuous
    ("sign(x)*x", [], [199]),
])
def test_poles_jumps_and_kinks_between_samples_are_breaks(expr, f_breaks, df_breaks):
    d = plot_data(parse(expr), "x", -3, 3, {}, n=400)
    assert d.f_breaks == [f_breaks] and d.df_breaks == [df_breaks]
    # the line is drawn in pieces that stop at the breaks
    assert len(segments(d.x, d.f[0], d.f_breaks[0])) == len(f_breaks) + 1


def test_a_kink_on_the_grid_has_no_derivative_there():
    d = plot_data(parse("abs(x)"), "x", -1, 1, {}, n=201)
    assert d.x[100] == 0 and math.isnan(d.df[0, 100]) and d.f[0, 100] == 0
    assert np.isfinite(np.delete(d.df[0], 100)).all()


def test_only_kinks_and_partials_along_the_plotted_variable_count():
    # x**y with y held at 2: d/dx = 2x exists for x < 0, although d/dy (log(x) * x**y) does not
    d = plot_data(parse("x**y"), "x", -3, -1, {"y": 2.0}, n=5, timeout=None)
    assert np.allclose(d.df[0], 2 * d.x, rtol=1e-12, atol=0)
    # sqrt(y) at y = 0 has no derivative by y, but plotting against x it is a constant
    d = plot_data(parse("sqrt(y)*x"), "x", -1, 1, {"y": 0.0}, n=5, timeout=None)
    assert np.all(d.df[0] == 0.0) and np.all(d.f[0] == 0.0)


def test_an_intermediate_overflow_with_a_finite_result_is_drawn():
    # exp(x) overflows at x = 800; 1/exp(x) is then 0, which is what float64 and the picture show
    d = plot_data(parse("1/exp(x)"), "x", 700, 800, {}, n=3, timeout=None)
    assert d.f[0][-1] == 0.0 and d.f[0][0] == pytest.approx(math.exp(-700), rel=1e-12)


def test_vector_expressions_have_one_row_per_output():
    d = plot_data(parse("x*y, y/x"), "x", -1, 1, {"y": 2.0}, n=20)
    assert d.f.shape == d.df.shape == (2, 20)
    np.testing.assert_allclose(d.df[0], 2.0)
    doc = d.to_dict()
    assert len(doc["f"]) == 2 and len(doc["f"][0]) == 20


def test_segments_cut_at_nan_and_breaks():
    x = np.arange(8.0)
    y = np.array([0, 1, np.nan, 3, 4, 5, 6, 7.0])
    pieces = segments(x, y, [4])
    assert [p[0].tolist() for p in pieces] == [[0, 1], [3, 4], [5, 6, 7]]


# --- steps data ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exp_steps():
    return step_data(parse("exp(x)"), {"x": 1.0}, "x")


def test_steps_span_1e_1_to_1e_16(exp_steps):
    assert exp_steps.steps[0] == pytest.approx(1e-1) and exp_steps.steps[-1] == pytest.approx(1e-16)
    assert exp_steps.reference == pytest.approx(math.e, rel=1e-16) and exp_steps.reference_method == "symbolic"


def test_truncation_slopes_are_the_orders_of_the_formulas(exp_steps):
    assert exp_steps.slopes["forward"]["truncation"] == pytest.approx(1, abs=0.05)
    assert exp_steps.slopes["central"]["truncation"] == pytest.approx(2, abs=0.05)
    assert exp_steps.slopes["complex_step"]["truncation"] == pytest.approx(2, abs=0.05)


def test_round_off_grows_like_one_over_h(exp_steps):
    assert exp_steps.slopes["forward"]["roundoff"] == pytest.approx(-1, abs=0.25)
    assert exp_steps.slopes["central"]["roundoff"] == pytest.approx(-1, abs=0.2)
    assert exp_steps.slopes["complex_step"]["roundoff"] is None  # no subtraction, no round-off branch


def test_errors_follow_the_textbook_formulas(exp_steps):
    h, e = exp_steps.steps, exp_steps.errors
    big = h >= 1e-3
    np.testing.assert_allclose(e["forward"][big], h[big] / 2, rtol=0.06)  # f''/(2f') h
    np.testing.assert_allclose(e["central"][big], h[big] ** 2 / 6, rtol=0.01)  # f'''/(6f') h**2
    # the bottom of the V lies near the textbook optimum
    assert np.argmin(e["forward"]) in range(*np.searchsorted(-h, [-1e-7, -1e-9]))
    assert e["central"].min() < 1e-10 < e["forward"].min()


def test_complex_step_is_exact_to_machine_precision_for_small_steps(exp_steps):
    small = exp_steps.steps <= 1e-8
    assert (exp_steps.errors["complex_step"][small] <= 2 * EPS).all()


def test_the_chosen_central_step_is_near_eps_to_the_third(exp_steps):
    assert EPS ** (1 / 3) / 10 <= exp_steps.chosen_step <= EPS ** (1 / 3) * 10
    assert exp_steps.chosen_error < 1e-9
    assert exp_steps.optimum == {"forward": pytest.approx(EPS ** 0.5), "central": pytest.approx(EPS ** (1 / 3))}


def test_complex_step_is_unavailable_through_abs():
    s = step_data(parse("abs(x)*x"), {"x": 1.0})
    assert s.errors["complex_step"] is None
    assert "abs" in s.messages["complex_step"]
    assert s.slopes["forward"]["truncation"] == pytest.approx(1, abs=0.05)


def test_wrt_chooses_the_variable():
    s = step_data(parse("x*exp(y)"), {"x": 2.0, "y": 0.5}, "y")
    assert s.variable == "y" and s.reference == pytest.approx(2 * math.exp(0.5), rel=1e-15)


def test_branch_slopes_of_a_synthetic_v():
    h = np.logspace(-1, -16, 61)
    assert branch_slopes(h, h ** 2 + 1e-16 / h) == (pytest.approx(2, abs=0.01), pytest.approx(-1, abs=0.01))
    assert branch_slopes(h[:2], h[:2]) == (None, None)


# --- saved files --------------------------------------------------------------------------------------

def _no_temp_files(folder):
    assert [p for p in os.listdir(folder) if p.startswith(".")] == []


def test_plot_saves_a_png(tmp_path):
    out = tmp_path / "sin.png"
    r = run("plot", "sin(x)", "--x", "-3:3", "--save", str(out))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "" and f"wrote {out}" in r.stderr
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    _no_temp_files(tmp_path)


def test_steps_saves_an_svg(tmp_path):
    out = tmp_path / "steps.SVG"
    r = run("steps", "exp(x)", "--at", "x=1", "--save", str(out))
    assert r.exit_code == 0, r.stderr
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    assert out.stat().st_size > 10_000
    _no_temp_files(tmp_path)


def test_save_with_json_writes_both(tmp_path):
    out = tmp_path / "p.png"
    r = run("plot", "x**2", "--x", "-1:1", "--save", str(out), "--json")
    assert r.exit_code == 0
    doc = strict_json(r.stdout)
    assert doc["saved"] == str(out) and out.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize("name", ["p.pdf", "p", "p.jpg"])
def test_save_needs_png_or_svg(tmp_path, name):
    r = run("plot", "sin(x)", "--x", "-3:3", "--save", str(tmp_path / name))
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip() == "error: --save: use .png or .svg"
    assert os.listdir(tmp_path) == []


def test_save_into_a_missing_folder(tmp_path):
    r = run("steps", "exp(x)", "--at", "x=1", "--save", str(tmp_path / "nope" / "s.png"))
    assert r.exit_code == 2 and "no such folder" in r.stderr


def test_save_refuses_a_fifo_or_a_device_and_writes_a_symlinks_target(tmp_path):
    os.mkfifo(tmp_path / "fifo.png")
    (tmp_path / "null.svg").symlink_to("/dev/null")
    for name in ("fifo.png", "null.svg"):
        r = run("steps", "exp(x)", "--at", "x=1", "--save", str(tmp_path / name))
        assert r.exit_code == 2 and r.stdout == ""
        assert r.stderr.strip() == f"error: --save {tmp_path / name}: not a regular file (refusing to replace it)"
    (tmp_path / "pics").mkdir()
    (tmp_path / "latest.png").symlink_to(tmp_path / "pics" / "p.png")
    assert run("plot", "sin(x)", "--x", "-3:3", "--save", str(tmp_path / "latest.png")).exit_code == 0
    assert (tmp_path / "latest.png").is_symlink()
    assert (tmp_path / "pics" / "p.png").read_bytes().startswith(PNG_SIGNATURE)
    assert sorted(os.listdir(tmp_path)) == ["fifo.png", "latest.png", "null.svg", "pics"]


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    def boom(self, *a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Figure, "savefig", boom)
    out = tmp_path / "p.png"
    r = run("plot", "sin(x)", "--x", "-3:3", "--save", str(out))
    assert r.exit_code == 2 and "No space left on device" in r.stderr
    assert os.listdir(tmp_path) == []


# --- the missing plot extra ---------------------------------------------------------------------------

@pytest.mark.parametrize("library, args", [
    ("plotext", ["plot", "sin(x)", "--x", "-3:3"]),
    ("plotext", ["steps", "exp(x)", "--at", "x=1"]),
    ("matplotlib", ["plot", "sin(x)", "--x", "-3:3", "--save", "p.png"]),
    ("matplotlib", ["steps", "exp(x)", "--at", "x=1", "--save", "p.svg"]),
])
def test_without_the_plot_extra_the_message_names_it(monkeypatch, tmp_path, library, args):
    monkeypatch.setitem(sys.modules, library, None)  # import now raises ImportError
    monkeypatch.chdir(tmp_path)
    r = run(*args)
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: gradcli {args[0]} needs the plot extra: pip install 'gradcli[plot]'")
    assert library in lines[0]
    assert os.listdir(tmp_path) == []


def test_json_needs_no_plotting_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "plotext", None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert run("plot", "sin(x)", "--x", "-3:3", "--json").exit_code == 0
    assert run("steps", "exp(x)", "--at", "x=1", "--json").exit_code == 0


# --- the CLI ------------------------------------------------------------------------------------------

def test_plot_in_the_terminal():
    r = run("plot", "sin(x)", "--x", "-pi:pi")
    assert r.exit_code == 0 and r.stderr == ""
    assert "sin(x)" in r.stdout and "d/dx = cos(x)" in r.stdout
    assert "\x1b[" not in r.stdout  # not a terminal: no colour codes
    assert max(len(line) for line in r.stdout.splitlines()) <= 100  # COLUMNS


def test_steps_in_the_terminal():
    r = run("steps", "exp(x)", "--at", "x=1")
    assert r.exit_code == 0 and r.stderr == ""
    assert "gradcli's central step: h = 6.06e-06" in r.stdout
    assert "1e-16" in r.stdout and "complex_step" in r.stdout


def test_plot_json_is_the_data():
    r = run("plot", "log(x)", "--x", "-1:1", "--points", "5", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["x"] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert doc["f"][:3] == [None, None, None] and doc["f"][3] == pytest.approx(math.log(0.5))
    assert doc["df"][3:] == [pytest.approx(2.0), pytest.approx(1.0)]
    assert doc["derivative"] == "1/x" and doc["status"] == "ok" and doc["undefined"] == {"f": 3, "df": 3}


def test_steps_json_is_the_data():
    r = run("steps", "x*exp(y)", "--at", "x=2, y=0.5", "--wrt", "y", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["variable"] == "y" and doc["status"] == "ok" and len(doc["steps"]) == 61
    assert set(doc["errors"]) == {"forward", "central", "complex_step"}
    assert doc["slopes"]["central"]["truncation"] == pytest.approx(2, abs=0.05)
    assert EPS ** (1 / 3) / 10 < doc["chosen"]["step"] < EPS ** (1 / 3) * 10
    none = strict_json(run("steps", "abs(x)*x", "--at", "x=1", "--json").stdout)
    assert none["errors"]["complex_step"] is None and "abs" in none["messages"]["complex_step"]


@pytest.mark.parametrize("args, status", [
    (["steps", "log(x)", "--at", "x=-1"], "undefined"),
    (["steps", "abs(x)", "--at", "x=0"], "nondifferentiable"),
    (["steps", "sqrt(x)", "--at", "x=0"], "undefined"),
])
def test_steps_at_a_bad_point_exits_3(args, status):
    r = run(*args)
    assert r.exit_code == 3 and r.stdout == "" and r.stderr.startswith(f"{status}: ")
    j = run(*args, "--json")
    doc = strict_json(j.stdout)
    assert j.exit_code == 3 and doc["status"] == status and doc["diagnostics"]


def test_plot_defined_nowhere_exits_3():
    r = run("plot", "log(x)", "--x", "-3:-1", "--json")
    assert r.exit_code == 3 and strict_json(r.stdout)["status"] == "undefined"
    assert "undefined everywhere" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["plot", "x*y", "--x", "-1:1"], "x and y are free"),
    (["plot", "x*y", "--x", "-1:1", "--var", "x"], "no value for y: pass --at y=VALUE"),
    (["plot", "x*y", "--x", "-1:1", "--at", "x=1, y=2"], "--at fixes every variable"),
    (["plot", "x*y", "--x", "-1:1", "--var", "x", "--at", "x=1, y=2"], "cannot also be fixed"),
    (["plot", "x*y", "--x", "-1:1", "--var", "z", "--at", "y=2"], "z is not a variable"),
    (["plot", "x*y", "--x", "y=-1:1", "--at", "x=1"], None),
    (["plot", "x", "--x", "1:-1"], "LO must be less than HI"),
    (["plot", "x", "--x", "1"], "--x expects LO:HI"),
    (["plot", "x", "--x", "0:2", "--points", "1"], "--points must be from 2"),
    (["plot", "x", "--x", "0:2", "--at", "q=1"], "--at q: not a variable"),
    (["plot", "2x", "--x", "0:2"], "did you mean 2*x?"),
    (["plot", "3", "--x", "0:2"], "no variable to plot"),
    (["steps", "x*y", "--at", "x=1"], "no value for y"),
    (["steps", "x*y", "--at", "x=1, y=2", "--wrt", "z"], "--wrt z: not a variable"),
    (["steps", "x, y", "--at", "x=1, y=2"], "steps needs a scalar expression"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    r = run(*args, "--json")
    if message is None:
        assert r.exit_code == 0
        return
    assert r.exit_code == 2, r.stdout
    assert message in r.stderr.splitlines()[0]
    assert strict_json(r.stdout)["status"] == "error"


def test_a_missing_range_is_a_usage_error_with_json():
    r = run("plot", "sin(x)", "--json")
    assert r.exit_code == 2 and "--x" in r.stderr and strict_json(r.stdout)["status"] == "error"


def test_gradcli_imports_and_runs_grad_without_the_plot_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "plotext", None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = run("grad", "x**2", "--at", "x=1", "--json")
    assert r.exit_code == 0 and strict_json(r.stdout)["status"] == "agree"


def test_importing_the_cli_loads_no_plotting_library():
    import subprocess

    code = ("import sys, gradcli, gradcli.cli, gradcli.plotting.data; "
            "print(sorted(m for m in ('plotext', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
