"""An exactly zero derivative (a stationary point, a corank-2 determinant, a constant function) is judged
absolutely, against the scale of an exact zero (gradcli.verdict.tolerance.exact_zero_scale), in numpy and
framework checks alike: never inconclusive for want of a scale, never failed for rounding."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _det(A):
    return np.linalg.det(A)


# rank 1, so the cofactor matrix (the gradient of det) is exactly 0; the SVD cofactor of the trace gives
# ~1e-12 from terms of |A|^2 ~ 1e4
RANK_ONE = np.outer([3.0, -7.0, 11.0], [13.0, 5.0, -9.0])


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_det_of_a_corank_two_matrix_passes_where_traced_ad_rounds_its_zero(mode):
    from gradcli import trace
    ad = trace.trace(_det, {"A": RANK_ONE}, ["A"], None).gradient()["A"]
    assert 1e-14 < np.max(np.abs(ad)) < 1e-10  # what made the check fail: rounding, not 0
    r = run(_det, A=RANK_ONE, mode=mode)
    assert r.status == "pass", r.message


def test_a_wrong_gradient_at_an_exact_zero_still_fails():
    r = run(_det, grad=lambda A: np.full((3, 3), 1e-6), A=RANK_ONE)
    assert r.status == "fail", r.message
    assert "A[" in r.message


def test_traced_zero_against_complex_steps_truncation_passes():
    # complex step gives -h**2 = -1e-40 for d/dx x**3 at 0, where traced AD gives the exact 0
    r = run(lambda x: np.sum(x ** 3), x=np.zeros(3))
    assert r.status == "pass", r.message


try:
    import torch
except ImportError:  # the torch cases below are skipped
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def _gradcheck(fn, x):
    return torch.autograd.gradcheck(fn, torch.tensor(x, requires_grad=True), raise_exception=False)


class _Square(torch.autograd.Function if torch else object):
    """sum(x**2) with a backward of 2x + ``bias``."""
    bias = 0.0

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return (x ** 2).sum()

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return g * (2 * x + cls.bias)


class _SquareOff(_Square):
    bias = 1e-3


class _SquareSlightlyOff(_Square):
    bias = 1e-9


@needs_torch
@pytest.mark.parametrize("fn", [lambda x: (x ** 2).sum(), lambda x: (x ** 3).sum(), lambda x: torch.cos(x).sum(),
                                lambda x: torch.cos(x)], ids=["square", "cube", "cos", "cos-vector"])
@pytest.mark.parametrize("mode", ["full", "fast"])
def test_torch_stationary_points_pass_as_gradcheck_does(fn, mode):
    x = np.zeros(3)
    assert _gradcheck(fn, x)
    r = run(fn, x=x, framework="torch", mode=mode)
    assert r.status == "pass", r.message


@needs_torch
def test_torch_function_at_a_stationary_point():
    x = np.zeros(3)
    assert _gradcheck(_Square.apply, x) and not _gradcheck(_SquareOff.apply, x)
    assert run(_Square.apply, x=x).status == "pass"
    off = run(_SquareOff.apply, x=x)
    assert off.status == "fail", off.message
    # below gradcheck's atol (1e-5), but 1e-9 where the derivative is exactly 0 is still wrong
    slightly = run(_SquareSlightlyOff.apply, x=x)
    assert slightly.status == "fail", slightly.message


@needs_torch
def test_torch_constant_function_passes():
    r = run(lambda x: (x * 0 + 1).sum(), x=np.ones(3), framework="torch")
    assert r.status == "pass", r.message


def _constant_jvp(tangent_share):
    """A jax.custom_jvp of x*0 + 1 whose rule gives ``tangent_share`` * t (0 is right)."""
    import jax
    import jax.numpy as jnp

    @jax.custom_jvp
    def one(x):
        return x * 0 + 1

    @one.defjvp
    def one_jvp(primals, tangents):
        return one(primals[0]), tangent_share * tangents[0]
    return one, jnp


@pytest.mark.parametrize("share, expected", [(0.0, "pass"), (1e-3, "fail")])
def test_jax_custom_jvp_of_a_nonzero_constant_in_forward_mode(share, expected):
    pytest.importorskip("jax")
    from jax.test_util import check_grads
    one, jnp = _constant_jvp(share)
    x = np.linspace(0.5, 1.5, 3)
    try:
        check_grads(one, (jnp.asarray(x),), order=1, modes=["fwd"])
        reference = "pass"
    except AssertionError:
        reference = "fail"
    assert reference == expected
    r = run(one, x=x)
    assert r.status == expected, r.message
