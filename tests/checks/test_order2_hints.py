"""order=2 failures of framework rules: the hint names the rule that is differentiated (a Function's
backward, a custom_vjp's bwd, a custom_jvp's jvp rule) and only the causes of that framework; never "the
hand-written gradient" where there is none."""
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check


def _order2(fn, **inputs):
    r = run_check(build_spec(fn, order=2, **inputs), {})
    assert r.status == "fail" and r.message.startswith("second order"), r.message
    return r.message


def _never(message, *words):
    for w in ("hand-written", *words):
        assert w not in message, (w, message)


def test_a_jax_custom_vjp_bwd_with_a_stopped_term():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def cubed(x):
        return jnp.sum(x ** 3)
    f = jax.custom_vjp(cubed)
    f.defvjp(lambda x: (cubed(x), x), lambda x, g: (g * 3 * jax.lax.stop_gradient(x) ** 2,))
    m = _order2(f, x=(4,))
    assert "differentiates the bwd of cubed" in m and "jax.lax.stop_gradient" in m
    _never(m, "torch", "jvp rule")


def test_a_jax_custom_jvp_rule_whose_derivative_is_wrong():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.custom_jvp
    def sine(x):
        return jnp.sin(x)

    @sine.defjvp
    def sine_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return jnp.sin(x), jnp.cos(jax.lax.stop_gradient(x)) * t  # right at first order, not its derivative

    m = _order2(sine, x=(4,))
    assert "the jvp rule of sine" in m
    _never(m, "torch", "bwd")


def test_a_torch_function_whose_backward_detaches_a_term():
    torch = pytest.importorskip("torch")

    class CubeDetached(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x ** 3).sum()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x.detach() ** 2

    m = _order2(CubeDetached.apply, x=(4,))
    assert "CubeDetached.backward" in m and ".detach()" in m
    _never(m, "stop_gradient", "jax", "cached or frozen")


def test_a_torch_backward_that_detaches_its_cotangent():
    torch = pytest.importorskip("torch")

    class ScaleDetachedG(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g.detach() * 2 * x

    m = _order2(ScaleDetachedG.apply, x=(3,))
    assert "along the cotangent" in m and "in ScaleDetachedG.backward" in m
    _never(m, "stop_gradient", "jax")
