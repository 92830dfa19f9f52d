"""order=2 and @f.hvp (gradcli.checks.comparisons.second_order): a gradient right at the point but wrong as a function of
the inputs is caught, a wrong Hessian-vector product is caught, a right one passes; the examples pass."""
from __future__ import annotations

import os

import numpy as np
import pytest

import gradcli
from gradcli.checks.collect import collect
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.checks.spec import REGISTRY
from gradcli.testing import assert_gradients
from cli_helpers import numpy_examples

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
A = np.random.default_rng(1).standard_normal((6, 4))
Y = np.random.default_rng(2).standard_normal(6)


def loss(x):  # nonlinear least squares: 0.5 ||tanh(A x) - y||^2
    return 0.5 * np.sum((np.tanh(A @ x) - Y) ** 2)


def loss_grad(x):
    t = np.tanh(A @ x)
    return A.T @ ((t - Y) * (1 - t ** 2))


def loss_hvp(v, x):
    t = np.tanh(A @ x)
    s = 1 - t ** 2
    return A.T @ ((s * s - 2 * t * s * (t - Y)) * (A @ v))


def loss_hvp_gauss_newton(v, x):  # the classic second-order bug: J^T J v, the residual curvature dropped
    s = 1 - np.tanh(A @ x) ** 2
    return A.T @ (s * s * (A @ v))


def run(fn=loss, **kw):
    kw.setdefault("x", (4,))
    return run_check(build_spec(fn, **kw), {})


def test_a_right_hvp_passes():
    r = run(grad=loss_grad, hvp=loss_hvp)
    assert r.status == "pass", r.message
    assert r.order == 2 and r.second_order["checks"] == {"gradient_field": "ok", "symmetry": "ok", "hvp": "ok"}
    assert "hand-written hvp agrees" in r.message
    d = r.to_dict()
    assert d["order"] == 2 and d["second_order"]["checks"]["hvp"] == "ok"


def test_a_wrong_hvp_fails_though_the_gradient_is_right():
    r = run(grad=loss_grad, hvp=loss_hvp_gauss_newton, taylor=True)
    assert r.status == "fail"
    assert r.message.startswith("second order: the hand-written hvp disagrees")
    assert r.mismatches and r.mismatches[0].input == "x"
    assert r.methods["hand_written_hvp"].status == "mismatch"
    # first order is right (slope 2), the remainder with the wrong Hessian term falls like h^2, not h^3
    assert r.taylor_verdict == "right" and r.taylor_verdict2 == "wrong" and 1.8 <= r.taylor_slope2 <= 2.2


def test_an_hvp_implies_order_2_unless_order_1_is_asked():
    assert run(grad=loss_grad, hvp=loss_hvp_gauss_newton).status == "fail"
    r = run(grad=loss_grad, hvp=loss_hvp_gauss_newton, order=1)
    assert r.status == "pass" and any("hvp is not checked" in n for n in r.notes)


def test_a_gradient_right_at_the_point_but_stale_elsewhere_is_caught():
    cache = {}

    def stale_grad(x):  # caches sech^2 from the first call: right at the check point, wrong anywhere else
        if "s" not in cache:
            cache["s"] = 1 - np.tanh(A @ x) ** 2
        return A.T @ ((np.tanh(A @ x) - Y) * cache["s"])

    r = run(grad=stale_grad)
    assert r.status == "pass"  # first order cannot see it
    cache.clear()
    r = run(grad=stale_grad, order=2)
    assert r.status == "fail"
    assert "right at the inputs but not as a function of them" in r.message
    assert r.second_order["checks"]["gradient_field"] == "mismatch"


X0 = np.random.default_rng(0).standard_normal(4)


def _cut(x):  # float() cuts the trace: no AD reference, the gradient's own differences and f only
    return float(loss(np.asarray(x, dtype=float)))


def test_without_ad_an_asymmetric_gradient_field_is_caught():
    K = np.array([[0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0.]])
    r = run(_cut, grad=lambda x: loss_grad(x) + K @ (x - X0), order=2)
    assert r.status == "fail" and "not symmetric" in r.message


def test_without_ad_a_symmetric_but_wrong_derivative_is_caught_by_the_taylor_test():
    r = run(_cut, grad=lambda x: loss_grad(x) + 0.3 * (x - X0), order=2)
    assert r.status == "fail" and "Taylor test" in r.message
    assert 1.8 <= r.taylor_slope2 <= 2.2


def test_without_ad_a_right_gradient_passes_order_2():
    r = run(_cut, grad=loss_grad, order=2)
    assert r.status == "pass", r.message
    assert r.taylor_verdict2 == "right" and 2.8 <= r.taylor_slope2 <= 3.2


@pytest.mark.parametrize("spec", [s for s in collect(numpy_examples(), None)[0]
                                  if os.sep + "bugs" + os.sep not in os.path.normpath(s.file)], ids=lambda s: s.name)
def test_the_correct_examples_pass_order_2(spec):
    r = run_check(spec, {"order": 2, "taylor": True})
    assert r.status == "pass", r.message
    assert r.taylor_verdict2 == "right", r.taylor2.detail
    if r.taylor_slope2 is not None:  # affine is bilinear: exact
        assert 2.7 <= r.taylor_slope2 <= 3.3


def test_decorator_registration_and_assert_gradients():
    before = len(REGISTRY)

    @gradcli.check(x=(4,))
    def f(x):
        return loss(x)

    f.grad(loss_grad)
    assert f.hvp(loss_hvp) is loss_hvp
    spec = REGISTRY[-1]
    del REGISTRY[before:]
    assert spec.hvp is loss_hvp and run_check(spec, {}).status == "pass"
    assert assert_gradients(loss, grad=loss_grad, hvp=loss_hvp, x=(4,)).order == 2
    with pytest.raises(AssertionError, match="second order"):
        assert_gradients(loss, grad=loss_grad, hvp=loss_hvp_gauss_newton, x=(4,))


def test_an_hvp_for_an_array_output_is_a_clear_failure():
    r = run(lambda x: np.tanh(x), vjp=lambda g, x: g * (1 - np.tanh(x) ** 2), hvp=lambda v, x: v)
    assert r.status == "fail" and "scalar output" in r.message


def test_an_hvp_with_several_inputs_takes_and_returns_one_array_each():
    def f(x, w):
        return np.sum(np.sin(x * w))

    def f_grad(x, w):
        c = np.cos(x * w)
        return c * w, c * x

    def f_hvp(v, x, w):
        vx, vw = v
        s, c = np.sin(x * w), np.cos(x * w)
        d = vx * w + vw * x
        return -s * w * d + c * vw, -s * x * d + c * vx

    r = run_check(build_spec(f, grad=f_grad, hvp=f_hvp, x=(3,), w=(3,)), {})
    assert r.status == "pass", r.message
    r = run_check(build_spec(f, grad=f_grad, hvp=lambda v, x, w: (v[0], v[1]), x=(3,), w=(3,)), {})
    assert r.status == "fail"
