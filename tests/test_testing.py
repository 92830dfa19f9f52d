"""gradcli.testing.assert_gradients: pass silently, fail with a readable message."""
import io
import os

import numpy as np
import pytest

from gradcli.checks.spec import REGISTRY
from gradcli.render.screen import Screen
from gradcli.testing import assert_gradients


def loss(x, w):
    return np.sum(np.tanh(x @ w))


def loss_grad(x, w):
    d = 1 - np.tanh(x @ w) ** 2
    return d @ w.T, x.T @ d


def test_correct_gradient_passes_and_registers_nothing():
    before = len(REGISTRY)
    result = assert_gradients(loss, grad=loss_grad, x=(3, 4), w=(4, 2))
    assert result.status == "pass" and len(REGISTRY) == before
    assert not hasattr(loss, "grad")


def test_message_names_input_index_expected_and_got():
    def bad_grad(x, w):
        dx, dw = loss_grad(x, w)
        dw = dw.copy()
        dw[2, 1] *= 1.01
        return dx, dw

    with pytest.raises(AssertionError) as info:
        assert_gradients(loss, grad=bad_grad, x=(3, 4), w=(4, 2))
    text = str(info.value)
    assert "FAIL" in text and "w[2, 1]" in text
    header, row = [line for line in text.splitlines() if line.startswith("  ")][:2]
    assert header.split() == ["input", "index", "expected", "got", "abs", "error", "rel", "error"]
    assert row.split()[:3] == ["w", "[2,", "1]"]


def test_vjp_options_and_expressions():
    assert_gradients(np.tanh, vjp=lambda g, x: g * (1 - np.tanh(x) ** 2), inputs={"x": (4, 3)}, rtol=1e-8)
    assert_gradients("x*sin(y)", grad={"x": "sin(y)", "y": "x*cos(y)"}, x=1.5, y=2.0)
    with pytest.raises(AssertionError, match="raised ZeroDivisionError"):
        assert_gradients(lambda x: np.sum(x ** 2), grad=lambda x: 1 / 0, x=(3,))


def test_errors_show_the_users_traceback():
    def model(x):
        return np.sum(x) + undefined_thing  # noqa: F821

    with pytest.raises(AssertionError) as info:
        assert_gradients(model, grad=lambda x: np.ones(3), x=(3,))
    text = str(info.value)
    assert "ERROR" in text and "NameError" in text and "in model" in text


def test_failure_text_is_the_one_gradcli_check_shows():

    from gradcli.checks.registry import build_spec
    from gradcli.checks.runner import run_check
    from gradcli.render.check import render_details

    def bad_grad(x, w):
        dx, dw = loss_grad(x, w)
        return dx * 1.5, dw

    with pytest.raises(AssertionError) as info:
        assert_gradients(loss, grad=bad_grad, x=(3, 4), w=(4, 2))
    text = str(info.value)
    result = run_check(build_spec(loss, grad=bad_grad, x=(3, 4), w=(4, 2)), {})
    assert result.status == "fail" and result.message
    first, head, message = text.splitlines()[:3]
    # what is wrong first (pytest's short summary shows that line), then the check as the report heads it
    wrong = {m.input for m in result.mismatches}
    assert first.startswith(", ".join(sorted(wrong)) + ": ") and first.endswith(f"{result.max_rel_error:.1e}")
    assert head.startswith("FAIL loss (") and head.endswith(", grad, full)") and message == result.message
    screen = Screen(io.StringIO(), width=400, color=False)
    shown = [line.strip() for line in screen.render(render_details(result)).splitlines() if line.strip()]
    assert shown[0].startswith("FAIL loss (") and shown[1] == message
    # the same elements, in the same order, with the same numbers
    rows = [line.split() for line in text.splitlines() if line.startswith("  ")][1:]
    assert [r[0] for r in rows] == [m.input for m in result.mismatches[:len(rows)]]
    for row in rows:
        assert any(row[2] in line and row[3] in line for line in shown)


def test_the_first_line_counts_the_wrong_entries_and_the_place_is_relative(monkeypatch, tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))

    def bad_grad(x, w):
        dx, dw = loss_grad(x, w)
        return dx, dw * 1.5  # every entry of w's gradient is wrong, none of x's

    monkeypatch.chdir(os.path.dirname(here))
    with pytest.raises(AssertionError) as info:
        assert_gradients(loss, grad=bad_grad, x=(3, 4), w=(4, 2))
    lines = str(info.value).splitlines()
    assert lines[0].startswith("w: 8 of 8 entries wrong, max rel err ")
    assert float(lines[0].rsplit(" ", 1)[1]) == pytest.approx(0.5, rel=0.05)  # 1.5 times the gradient
    assert lines[1].startswith(f"FAIL loss ({os.path.join('tests', 'test_testing.py')}:")
    # outside the working directory the path stays absolute
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError) as info:
        assert_gradients(loss, grad=bad_grad, x=(3, 4), w=(4, 2))
    assert str(info.value).splitlines()[1].startswith(f"FAIL loss ({os.path.abspath(__file__)}:")
