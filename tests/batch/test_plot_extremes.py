"""``gradcli plot`` over ranges at the ends of float64: a range whose width overflows is one line and
exit 2 (its samples would be NaN), and a range or values beyond what plotext's arithmetic survives
(about 1e306, or below 1e-300) are drawn in units of a power of ten, said on the axis, never a
traceback from inside the plotting library."""
from __future__ import annotations

import numpy as np
import pytest

from gradcli.cli import main
from gradcli.plotting.render import axis_unit, clip_to, y_limits
from cli_helpers import RUNNER, strict_json

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
ENV = {"FORCE_COLOR": None, "NO_COLOR": "1", "COLUMNS": "90", "LINES": "30"}


def plot(*args):
    r = RUNNER.invoke(main, ["plot", *args], env=ENV, catch_exceptions=False)
    assert "Traceback" not in r.stdout and "Traceback" not in r.stderr
    return r


@pytest.mark.parametrize("rng", ["-1e308:1e308", "-1.7e308:1e308", "-9e307:9e307"])
@pytest.mark.parametrize("json", [False, True])
def test_a_range_wider_than_float64_is_one_line(rng, json):
    r = plot("sin(x)", "--x", rng, *(["--json"] if json else []))
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [r.stderr.strip()] and "HI - LO overflows float64" in r.stderr
    if json:
        assert strict_json(r.stdout)["status"] == "error"
    else:
        assert r.stdout == ""


@pytest.mark.parametrize("expr, rng, unit", [
    ("sin(x)", "0:1e308", "x (×1e308)"),
    ("sin(x)", "-1e308:-1e307", "x (×1e308)"),
    ("sin(x)", "-8e307:8e307", "x (×1e307)"),
    ("sin(x)", "0:1e-310", "x (×1e-310)"),
    ("x", "0:1e-320", "x (×1e-321)"),
    ("exp(x)", "0:709", "×1e307"),
    ("1e307*x", "-5:5", "×1e307"),
])
def test_extreme_ranges_and_values_are_drawn_in_units_of_a_power_of_ten(expr, rng, unit):
    pytest.importorskip("plotext")
    r = plot(expr, "--x", rng)
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "" and unit in r.stdout


def test_ordinary_ranges_keep_plain_axes():
    pytest.importorskip("plotext")
    r = plot("sin(x)", "--x", "-3:3")
    assert r.exit_code == 0 and "×1e" not in r.stdout


def test_json_of_an_extreme_range_is_strict_json():
    r = plot("sin(x)", "--x", "0:1e308", "--json")
    assert r.exit_code == 0
    doc = strict_json(r.stdout)
    assert doc["range"] == [0.0, 1e308] and doc["x"][-1] == 1e308


def test_save_of_an_extreme_range(tmp_path):
    pytest.importorskip("matplotlib")
    r = plot("1e307*x", "--x", "0:1e308", "--save", str(tmp_path / "p.png"))
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_axis_unit_is_one_inside_the_band_and_a_power_of_ten_outside():
    assert axis_unit(np.array([-3.0, 3.0])) == 1.0
    assert axis_unit(np.array([np.nan, 0.0])) == 1.0
    assert axis_unit(np.array([0.0, 1e308])) == 1e308
    assert axis_unit(np.array([np.inf, -2e-310])) == 1e-310


def test_y_limits_near_the_largest_float_are_finite_or_none():
    y = np.concatenate([np.linspace(-1.7e308, 0, 100), np.linspace(0, 1.7e308, 100), [1.79e308] * 3])[None, :]
    limits = y_limits(y)
    assert limits is None or all(np.isfinite(limits))


def test_a_picture_does_not_keep_the_previous_pictures_lines():
    # plotext clears only its active panel: the other panel kept the last picture's lines and legend
    pytest.importorskip("plotext")
    from gradcli.core.parser import parse
    from gradcli.plotting.data import plot_data
    from gradcli.plotting.render import plot_terminal

    first = plot_data(parse("sin(x)"), "x", -1e308, -1e307, {}, n=200)
    second = plot_data(parse("x**2"), "x", -3, 3, {}, n=200)
    alone = plot_terminal(second, "x**2", ["f"], 90, 28, False)
    plot_terminal(first, "sin(x)", ["f"], 90, 28, False)
    assert plot_terminal(second, "x**2", ["f"], 90, 28, False) == alone


def test_a_spike_far_beyond_the_shown_range_is_drawn_at_once():
    # exp(x**2) reaches 1e293 at the last sample while the y range shows the 2nd to 98th percentile:
    # plotext filled the line to the spike point by point (gigabytes, minutes)
    pytest.importorskip("plotext")
    r = plot("exp(x**2)", "--x", "0:26")
    assert r.exit_code == 0 and r.stderr == ""


def test_clip_to_keeps_the_part_inside_and_ends_on_the_edges():
    xs, ys = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 1.0, 5.0, 0.5])
    (x1, y1), (x2, y2) = clip_to(xs, ys, -1.0, 2.0)
    np.testing.assert_allclose(x1, [0.0, 1.0, 1.25])
    np.testing.assert_array_equal(y1, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(x2, [2 + 2 / 3, 3.0])
    np.testing.assert_array_equal(y2, [2.0, 0.5])
    # through the whole band in one step: one piece from edge to edge
    (x3, y3), = clip_to(np.array([0.0, 1.0]), np.array([-3.0, 5.0]), -1.0, 2.0)
    np.testing.assert_allclose(x3, [0.25, 0.625])
    np.testing.assert_array_equal(y3, [-1.0, 2.0])
    spike = clip_to(np.arange(3.0), np.array([0.0, 1e300, 0.0]), -1.0, 1.0)
    assert all(np.all(np.abs(ys) <= 1.0) for _, ys in spike)
