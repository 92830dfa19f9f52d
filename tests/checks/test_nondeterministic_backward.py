"""A backward whose result varies between runs (nondet_tol=) at order 2: its jitter is noise in the
gradient field, never a kink. PyTorch's own test_gradcheck_nondeterministic is the reference."""
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")


class NonDetFunc(torch.autograd.Function):
    """The identity, whose backward (differentiable: it calls the Function again) multiplies by
    1 + U[0, 1) * jitter, as in PyTorch's test_autograd."""

    @staticmethod
    def forward(ctx, x, jitter=0.0):
        ctx._jitter = jitter
        return x

    @staticmethod
    def backward(ctx, grad_out):
        return NonDetFunc.apply(grad_out, ctx._jitter) * (1 + torch.rand_like(grad_out) * ctx._jitter), None


def _jittered(jitter):
    def identity(x):
        return NonDetFunc.apply(x, jitter)
    return identity


def _gradgradcheck(jitter, **kw):
    x = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    try:
        return torch.autograd.gradgradcheck(_jittered(jitter), x, check_batched_grad=False, **kw)
    except RuntimeError:
        return False


@pytest.mark.parametrize("jitter, nondet_tol, expected", [
    (1e-12, 1e-5, "pass"),   # the jitter is allowed, and far below what order 2 compares
    (1e-12, None, "fail"),   # not allowed: not deterministic
    (1e-6, 1e-5, "fail"),    # allowed at first order, but the double backward is off by 1e-6
    (0.0, None, "pass"),
])
def test_order_two_with_a_jittered_backward_gives_gradgradchecks_verdict(jitter, nondet_tol, expected):
    kw = {} if nondet_tol is None else {"nondet_tol": nondet_tol}
    assert _gradgradcheck(jitter, **kw) == (expected == "pass")
    r = run_check(build_spec(_jittered(jitter), x=(5, 5), order=2, framework="torch", **kw), {})
    assert r.status == expected, r.message
