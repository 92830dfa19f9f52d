"""A framework's rule at a kink (gradcli.checks.comparisons.subgradient): a value between the one-sided derivatives
along every direction checked is a valid subgradient and passes with a note naming the convention; one
outside fails; a numpy check's gradient at a kink stays nondifferentiable. References: gradcheck where it
has a verdict of its own (it compares with central differences, the mean of the one-sided slopes), and
the subdifferential in closed form (relu at 0: [0, 1]; abs at 0: [-1, 1])."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")

INDEX = torch.tensor([0, 0, 1, 1])
TIED = np.array([1.0, 1.0, 2.0, 2.0])  # every group of the scatter ties


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _gradcheck(fn, x):
    return torch.autograd.gradcheck(fn, torch.tensor(x, requires_grad=True), raise_exception=False)


def scatter_amax(x):
    return torch.zeros(2, dtype=x.dtype).scatter_reduce(0, INDEX, x, "amax", include_self=False)


def _split(weights):
    """scatter_reduce amax with a backward that gives each element ``weights`` of its group's cotangent."""
    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return scatter_amax(x.detach())

        @staticmethod
        def backward(ctx, g):
            return g[INDEX] * torch.tensor(weights, dtype=g.dtype)
    return Split.apply


def _at_zero(primal, slope_at_zero):
    """``primal`` (relu, abs) with a backward whose slope at 0 is ``slope_at_zero`` (its sign elsewhere)."""
    class Rule(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return primal(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            slope = torch.where(x > 0, 1.0, torch.where(x < 0, -1.0 if primal is torch.abs else 0.0, slope_at_zero))
            return g * slope.to(g.dtype)
    return Rule.apply


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_scatter_amax_ties_torchs_even_split_passes_as_gradcheck_does(mode):
    assert _gradcheck(scatter_amax, TIED)
    r = run(scatter_amax, x=TIED, framework="torch", mode=mode)
    assert r.status == "pass", r.message
    assert "subgradient" in r.message
    if mode == "full":
        assert any("the mean of the one-sided slopes" in n for n in r.notes)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_split_of_the_tie_that_sums_to_two_fails_as_gradcheck_does(mode):
    doubled = _split([1.0, 1.0, 1.0, 1.0])
    assert not _gradcheck(doubled, TIED)
    r = run(doubled, x=TIED, mode=mode)
    assert r.status == "fail", r.message
    assert "not a subgradient" in r.message


def test_an_uneven_split_that_sums_to_one_is_a_subgradient():
    # gradcheck fails it (central differences give 1/2 each); every split summing to 1 is a subgradient
    uneven = _split([1.0, 0.0, 0.25, 0.75])
    assert not _gradcheck(uneven, TIED)
    r = run(uneven, x=TIED)
    assert r.status == "pass", r.message


@pytest.mark.parametrize("slope, side", [(0.0, "the slope from the left"), (1.0, "the slope from the right")])
@pytest.mark.parametrize("mode", ["full", "fast"])
def test_relu_at_zero_with_either_one_sided_slope_passes(slope, side, mode):
    r = run(_at_zero(torch.relu, slope), x=np.zeros(3), mode=mode)
    assert r.status == "pass", r.message
    if mode == "full":
        assert any(side in n for n in r.notes), r.notes


@pytest.mark.parametrize("slope, expected", [(0.0, "pass"), (-1.0, "pass"), (2.0, "fail")])
@pytest.mark.parametrize("mode", ["full", "fast"])
def test_abs_at_zero_is_judged_by_its_subdifferential(slope, expected, mode):
    r = run(_at_zero(torch.abs, slope), x=np.zeros(3), mode=mode)
    assert r.status == expected, r.message


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_numpy_checks_keep_their_rule_at_a_kink(mode):
    r = run(lambda x: np.maximum(x, 0).sum(), x=np.zeros(3), mode=mode)
    assert r.status == "nondifferentiable", r.message


@pytest.mark.parametrize("slope, expected", [(0.0, "pass"), (2.0, "fail")])
def test_a_jax_custom_jvp_at_a_kink_in_both_modes(slope, expected):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @jax.custom_jvp
    def absolute(x):
        return jnp.abs(x)

    @absolute.defjvp
    def absolute_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return absolute(x), jnp.where(x == 0, slope, jnp.sign(x)) * t
    r = run(absolute, x=np.zeros(3))
    assert r.status == expected, r.message
    if expected == "pass":
        assert "forward mode" in r.message and "crossing a kink" in r.message


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_order_two_at_a_kink_is_nondifferentiable(mode):
    # the first order passes as a subgradient; the Hessian does not exist there (it was a Taylor-test fail)
    r = run(scatter_amax, x=TIED, framework="torch", order=2, mode=mode)
    assert r.status == "nondifferentiable", r.message
    assert r.message.startswith("second order:")
