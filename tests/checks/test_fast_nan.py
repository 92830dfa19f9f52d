"""Fast mode with a nan in a given input: the finite elements are judged (a vjp wrong at every one of them
fails), the nan ones are reported as undefined, as full mode does. Reference: the closed-form derivative
cos(x) of sin, and x's elementwise product rule."""
import numpy as np
import pytest

import gradcli.trace
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

X = np.array([0.3, np.nan, 1.2, -0.7, 2.0, 0.1, -1.4, 0.9])


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


@pytest.fixture(params=["traced", "numerics"])
def reference(request, monkeypatch):
    """Traced AD as the reference, and finite differences alone."""
    if request.param == "numerics":
        def no_trace(*a, **k):
            raise RuntimeError("tracing switched off for this test")
        monkeypatch.setattr(gradcli.trace, "trace", no_trace)
    return request.param


@pytest.mark.parametrize("off", [1.01, -1.0])
def test_a_vjp_wrong_everywhere_fails_despite_one_nan(reference, off):
    r = run(np.sin, vjp=lambda g, x: {"x": g * np.cos(x) * off}, x=X, mode="fast")
    assert r.mode == "fast"
    assert r.status == "fail", (r.status, r.message)
    assert any("x[1]: the input is nan" in n for n in r.notes), r.notes


def test_a_right_vjp_is_undefined_at_the_nan_only(reference):
    r = run(np.sin, vjp=lambda g, x: {"x": g * np.cos(x)}, x=X, mode="fast")
    assert r.status == "undefined", (r.status, r.message)
    assert "x[1]: the input is nan" in r.message and "other" in r.message


def test_two_inputs_one_with_an_inf(reference):
    y = np.linspace(0.5, 2.0, X.size)
    x = np.where(np.isnan(X), np.inf, X)

    def f(x, y):
        return np.sin(x) + y ** 2

    right = {"x": lambda g, x, y: g * np.cos(x), "y": lambda g, x, y: 2 * g * y}
    ok = run(f, vjp=lambda g, x, y: {k: r(g, x, y) for k, r in right.items()}, x=x, y=y, mode="fast")
    assert ok.status == "undefined" and "x[1]: the input is inf" in ok.message, ok.message
    # d/dy wrong at every element (y where it should be 2y)
    wrong = run(f, vjp=lambda g, x, y: {"x": right["x"](g, x, y), "y": g * y}, x=x, y=y, mode="fast")
    assert wrong.status == "fail", (wrong.status, wrong.message)


def test_an_input_reaching_an_output_that_is_not_finite_is_left_to_full_mode(reference):
    # sin(inf) * y: y[1]'s cofactor is nan, which the random directions cannot attribute: never a pass
    y = np.linspace(0.5, 2.0, X.size)
    x = np.where(np.isnan(X), np.inf, X)
    r = run(lambda x, y: np.sin(x) * y, vjp=lambda g, x, y: {"x": g * np.cos(x) * y, "y": g * np.sin(x)},
            x=x, y=y, mode="fast")
    assert r.status == "undefined" and "mode='full' judges the other elements" in r.message, r.message


def test_an_output_not_finite_at_finite_inputs_stays_undefined_in_fast_mode():
    # log at a negative element: fast mode cannot tell which input it comes from
    x = np.array([0.5, -1.0, 2.0])
    r = run(np.log, vjp=lambda g, x: {"x": g / x}, x=x, mode="fast")
    assert r.status == "undefined" and "mode='full' judges the other elements" in r.message
