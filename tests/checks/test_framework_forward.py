"""Framework checks in forward mode (a torch Function's jvp, a jax.custom_jvp) and torch's gradient dtypes,
each torch case also run through torch's own gradcheck (check_forward_ad=True, check_grad_dtypes=True)."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")

from torch_corpus import SinMul, SinMulJvpDropsW  # noqa: E402 - needs torch


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def torch_says(cls, *shapes, **kw) -> bool:
    """torch's own gradcheck verdict on ``cls`` at a seeded float64 point."""
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in shapes]
    return torch.autograd.gradcheck(cls.apply, xs, raise_exception=False, **kw)


class Square(torch.autograd.Function):
    """y = x^2 in torch's newer style (setup_context), with a jvp."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g

    @staticmethod
    def jvp(ctx, dx):
        x, = ctx.saved_tensors
        return 2 * x * dx


class SquareJvpOff(Square):
    @staticmethod
    def jvp(ctx, dx):
        x, = ctx.saved_tensors
        return 2.5 * x * dx


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


class ExpFloat32Grad(Exp):
    """Right to float32's precision, but it hands torch a float32 gradient for a float64 input."""

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return (g * y).float()


def test_correct_function_jvp_passes_forward_mode():
    r = run(SinMul, inputs={"x": (3, 2), "w": (3, 2)})
    assert r.status == "pass", r.message
    assert "forward mode: torch's jvp agrees" in r.message
    assert r.methods["torch_jvp"].status == "ok"
    assert torch_says(SinMul, (3, 2), (3, 2), check_forward_ad=True)


def test_wrong_jvp_fails_naming_forward_mode_where_reverse_mode_passes():
    r = run(SinMulJvpDropsW, inputs={"x": (3, 2), "w": (3, 2)})
    assert r.status == "fail"
    assert r.message.startswith("forward mode (torch's jvp) disagrees with finite differences along random tangent")
    assert r.methods["torch_jvp"].status == "mismatch"
    m = r.mismatches[0]
    assert m.input == "J u" and m.direction is not None and len(m.output_index) == 2
    assert abs(m.got - m.expected) > 1e-3 * abs(m.expected)
    # torch agrees: reverse mode is right, forward mode is not
    assert torch_says(SinMulJvpDropsW, (3, 2), (3, 2))
    assert not torch_says(SinMulJvpDropsW, (3, 2), (3, 2), check_forward_ad=True)


def test_setup_context_style_jvp_is_checked_both_ways():
    good, bad = run(Square, inputs={"x": (4,)}), run(SquareJvpOff, inputs={"x": (4,)})
    assert good.status == "pass" and "forward mode" in good.message, good.message
    assert bad.status == "fail" and "forward mode (torch's jvp)" in bad.message
    assert not torch_says(SquareJvpOff, (4,), check_forward_ad=True)


def test_function_without_jvp_has_no_forward_mode_check():
    r = run(Exp, inputs={"x": (3,)})
    assert r.status == "pass" and "forward mode" not in r.message
    assert "torch_jvp" not in r.methods


def test_float32_gradient_for_float64_input_fails_naming_dtypes():
    r = run(ExpFloat32Grad, inputs={"x": (3,)})
    assert r.status == "fail"
    assert "the backward returned a float32 gradient for x, a float64 input" in r.message
    assert "losing precision" in r.message
    # what torch hands on is float64 but carries float32's rounding (torch's gradcheck, check_grad_dtypes
    # included, passes it: the conversion happens before gradcheck sees the gradient)
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    got, = torch.autograd.grad(ExpFloat32Grad.apply(x.clone()), x, torch.ones(3, dtype=torch.float64))
    got, x = got.detach(), x.detach()
    assert got.dtype == torch.float64
    gap, big = float((got - torch.exp(x)).abs().max()), float(torch.exp(x).max())
    assert 0 < gap < 1e-6 * big
    assert run(Exp, inputs={"x": (3,)}).status == "pass"


def test_an_integer_gradient_for_a_float64_input_is_called_one():
    class ExpInt64Grad(Exp):
        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return (g * y).long()

    r = run(ExpInt64Grad, inputs={"x": (3,)})
    assert r.status == "fail"
    assert "the backward returned an int64 gradient for x, a float64 input" in r.message, r.message
    assert "integer gradient" in r.message and "extra precision" not in r.message
    # what torch hands on is float64 with the fractions gone
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    got, = torch.autograd.grad(ExpInt64Grad.apply(x.clone()), x, torch.ones(3, dtype=torch.float64))
    assert got.dtype == torch.float64 and torch.equal(got, torch.trunc(torch.exp(x.detach())))


def test_gradient_dtype_names_the_input_among_several():
    class MulHalfW(SinMul):
        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * torch.cos(x) * w, (g * torch.sin(x)).float()

    r = run(MulHalfW, inputs={"x": (2,), "w": (2,)})
    assert r.status == "fail" and "float32 gradient for w, a float64 input" in r.message


def test_float32_check_takes_a_float32_gradient():
    r = run(Exp, inputs={"x": (3,)}, dtype="float32")
    assert r.status == "pass", r.message


def test_jax_custom_jvp_wrong_tangent_fails_in_forward_mode():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def make(slope_of_y):
        @jax.custom_jvp
        def f(x, y):
            return jnp.sin(x) * y

        @f.defjvp
        def f_jvp(primals, tangents):
            (x, y), (dx, dy) = primals, tangents
            # the y term also holds a tangent-free constant: it transposes to the right vjp for x only
            return f(x, y), jnp.cos(x) * y * dx + slope_of_y * jnp.sin(x) * dy
        return f

    good = run(make(1.0), inputs={"x": (3,), "y": (3,)})
    assert good.status == "pass" and "forward mode: JAX's jvp agrees" in good.message, good.message
    bad = make(1.5)
    r = run(bad, inputs={"x": (3,), "y": (3,)})
    assert r.status == "fail"
    assert "JAX's jvp" in r.message or "JAX" in r.message
    # JAX's own check in forward mode agrees
    from jax.test_util import check_grads
    x, y = jnp.array([0.3, -0.2, 0.9]), jnp.array([1.1, 0.4, -0.7])
    with pytest.raises(AssertionError):
        check_grads(bad, (x, y), order=1, modes=["fwd"])


def test_jax_custom_jvp_wrong_only_in_forward_mode_fails_there():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        # a tangent-free term: JAX's transpose drops it, so reverse mode is right and forward mode is not
        return f(x), jnp.cos(x) * dx + 0.1 * x

    r = run(f, inputs={"x": (3,)})
    assert r.status == "fail"
    assert r.message.startswith("forward mode (JAX's jvp) disagrees with finite differences"), r.message
    assert np.isfinite(r.mismatches[0].expected)
