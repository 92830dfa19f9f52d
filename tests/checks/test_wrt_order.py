"""A hand-written gradient comes back in wrt order; one in another order fails, and says so where a swap
of two inputs of one shape would make it agree."""
import numpy as np
import pytest

import gradcli.trace

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check


def model(W, b):
    return np.sum(np.sin(W) * np.exp(b))


def grad_W(W, b):  # closed form: d/dW sin(W) e^b = cos(W) e^b
    return np.cos(W) * np.exp(b)


def grad_b(W, b):
    return np.sin(W) * np.exp(b)


def run(grad, mode="full"):
    return run_check(build_spec(model, grad=grad, W=(3,), b=(3,), wrt=["b", "W"], mode=mode), {})


def test_gradients_in_wrt_order_pass():
    r = run(lambda W, b: (grad_b(W, b), grad_W(W, b)))
    assert r.status == "pass", r.message


# fast mode with finite differences alone compares random directions, not elements: no pair to swap
@pytest.mark.parametrize("mode, traced", [("full", True), ("full", False), ("fast", True)])
def test_gradients_in_parameter_order_fail_with_the_swap_named(mode, traced, monkeypatch):
    if not traced:  # finite differences alone as the reference
        monkeypatch.setattr(gradcli.trace, "trace", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("off")))
    r = run(lambda W, b: (grad_W(W, b), grad_b(W, b)), mode)
    assert r.status == "fail"
    assert "the gradients for b and W match if swapped" in r.message
    assert "wrt=['b', 'W']" in r.message


def test_a_real_mismatch_gets_no_swap_hint():
    r = run(lambda W, b: (2 * grad_W(W, b), grad_b(W, b)))
    assert r.status == "fail"
    assert "swapped" not in r.message


def test_a_pass_does_not_look_for_a_swap(monkeypatch):
    import gradcli.checks.comparisons.elements as compare

    def never(*a, **k):
        raise AssertionError("the swap is looked for on failures only")
    monkeypatch.setattr(compare, "_swap_hint", never)
    assert run(lambda W, b: (grad_b(W, b), grad_W(W, b))).status == "pass"
