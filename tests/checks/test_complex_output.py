"""A complex output of real inputs in torch and JAX checks: its real and imaginary parts are two real
outputs, and the framework's vjp of g_re + i g_im is the sum of theirs (as gradcheck splits it).
The references are torch's and JAX's own autograd of the same function and hand-derived rules."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


class Phase(torch.autograd.Function):
    """exp(i x) for real x: d/dx = i exp(i x); with a cotangent g, x.grad = Re(conj(i e^{ix}) g)."""
    conj = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.exp(1j * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = 1j * torch.exp(1j * x)
        return ((d.conj() if ctx._forward_cls.conj else d) * g).real


class PhaseUnconjugated(Phase):
    """The classic slip: the derivative not conjugated (gives J_r g_r - J_i g_i)."""
    conj = False


def test_a_right_real_to_complex_function_passes_and_says_how_it_was_split():
    r = run(Phase, x=(4,))
    assert r.status == "pass", r.message
    assert any("output is complex" in n for n in r.notes)


def test_an_unconjugated_backward_fails():
    r = run(PhaseUnconjugated, x=(4,))
    assert r.status == "fail", r.message


def test_the_split_matches_torch_autograd_of_the_parts():
    # gradcli's convention for the cotangent g_re + i g_im is torch's own: autograd of
    # g_re . Re f + g_im . Im f equals the backward of f with the complex cotangent
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    g_re, g_im = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64), torch.tensor([0.7, 0.1, -1.0], dtype=torch.float64)
    (via_parts,) = torch.autograd.grad((g_re * torch.cos(x) + g_im * torch.sin(x)).sum(), x)
    (via_complex,) = torch.autograd.grad(Phase.apply(x), x, grad_outputs=g_re + 1j * g_im)
    assert torch.allclose(via_parts, via_complex)


def test_order_two_of_a_complex_output_is_skipped_not_misjudged():
    r = run(Phase, x=(3,), order=2)
    assert r.status == "skipped" and "complex output" in r.message


def test_a_jax_custom_vjp_real_to_complex():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def make(conj):
        @jax.custom_vjp
        def phase(x):
            return jnp.exp(1j * x)

        def fwd(x):
            return phase(x), x

        def bwd(x, g):
            # JAX's cotangent convention for a complex output: x_bar = Re(g * d) (no conjugation)
            d = 1j * jnp.exp(1j * x)
            return (jnp.real((jnp.conj(d) if conj else d) * g),)

        phase.defvjp(fwd, bwd)
        return phase

    right, wrong = run(make(False), x=(4,)), run(make(True), x=(4,))
    assert right.status == "pass", right.message
    assert wrong.status == "fail", wrong.message
    # JAX's own autodiff of the plain function agrees with the right rule
    x = jnp.array([0.3, -1.2])
    g = jnp.array([1.0 - 2.0j, 0.5 + 0.7j])
    _, pull = jax.vjp(lambda x: jnp.exp(1j * x), x)
    _, pull_rule = jax.vjp(make(False), x)
    np.testing.assert_allclose(pull(g)[0], pull_rule(g)[0])
