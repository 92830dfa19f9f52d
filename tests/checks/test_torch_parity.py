"""torch checks on cases of our own, each beside the verdict of torch's own gradcheck / gradgradcheck:
the cotangents a backward is given, torch's forward-mode rules, outputs whose dtype or shape moves, None
read as zero, tensor hooks, reentrance, once_differentiable and complex inputs."""
import itertools

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")
fwad = pytest.importorskip("torch.autograd.forward_ad")
from torch.autograd.function import once_differentiable  # noqa: E402 - needs torch


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def gradcheck(f, *inputs, second=False, **kw):
    """torch's own verdict: "pass", or "fail: " and the first line of what it raised."""
    check = torch.autograd.gradgradcheck if second else torch.autograd.gradcheck
    try:
        return "pass" if check(f, inputs, **kw) else "fail"
    except Exception as exc:  # noqa: BLE001 - gradcheck raises its verdict
        return "fail: " + str(exc).splitlines()[0]


def leaf(a, dtype=torch.float64):
    return torch.tensor(np.asarray(a), dtype=dtype, requires_grad=True)


X = np.array([0.5, -0.25, 1.5, 0.75])


# --- the cotangent ---------------------------------------------------------------------------------

class CubeSum(torch.autograd.Function):
    """A scalar output: with the cotangent 1 only, a backward that ignores it passes."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x ** 3).sum()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class CubeSumIgnoresG(CubeSum):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2


class CubeSumOnlyWhereG(CubeSum):
    """Zero for a zero cotangent, the right gradient for the cotangent 1, wrong for any other."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * (g != 0)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_backward_that_ignores_its_cotangent_fails_for_a_scalar_output(mode):
    assert run(CubeSum.apply, x=X, mode=mode).status == "pass"
    assert gradcheck(CubeSum.apply, leaf(X)) == "pass"
    r = run(CubeSumIgnoresG.apply, x=X, mode=mode)
    assert r.status == "fail" and "not multiplied by its cotangent" in r.message, r.message
    assert {m.input for m in r.mismatches} == {"x"} and all(m.expected == 0 for m in r.mismatches)
    assert gradcheck(CubeSumIgnoresG.apply, leaf(X)) == "fail: backward not multiplied by grad_output"
    # gradcheck's cotangents are 0 and 1: this one passes there, and is wrong for every other cotangent
    assert gradcheck(CubeSumOnlyWhereG.apply, leaf(X)) == "pass"
    r = run(CubeSumOnlyWhereG.apply, x=X, mode=mode)
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x"}, r.message


def test_a_hand_written_numpy_vjp_gets_the_same_cotangents():
    def energy(x):
        return np.sum(x ** 3)

    r = run(energy, vjp=lambda g, x: 3 * x ** 2, x=X)  # g left out
    assert r.status == "fail" and "not multiplied by its cotangent" in r.message, r.message
    assert run(energy, vjp=lambda g, x: g * 3 * x ** 2, x=X).status == "pass"
    r = run(energy, vjp=lambda g, x: np.abs(g) * 3 * x ** 2, x=X, mode="full")  # loses the cotangent's sign
    assert r.status == "fail", r.message


# --- forward mode as forward_ad runs it -----------------------------------------------------------

def _pair_returning(jvp_of_x):
    class PairFn(torch.autograd.Function):
        """Returns x + y and x as-is; torch requires the jvp of an input returned as-is to be a view."""

        @staticmethod
        def forward(ctx, x, y):
            return x + y, x

        @staticmethod
        def vjp(ctx, g1, g2):
            return g1 + g2, g1

        @staticmethod
        def jvp(ctx, tx, ty):
            return tx + ty, jvp_of_x(tx)
    return PairFn


@pytest.mark.parametrize("output", [0, 1])
def test_forward_mode_runs_torchs_own_checks_of_the_jvp(output):
    good = _pair_returning(lambda t: t.view_as(t))
    bad = _pair_returning(lambda t: t)  # the tangent itself, not a view of it
    a, b = leaf(X), leaf(X[::-1].copy())
    assert gradcheck(good.apply, a, b, check_forward_ad=True) == "pass"
    assert "the jvp is not returning a view" in gradcheck(bad.apply, a, b, check_forward_ad=True)
    r = run(good.apply, x=X, y=X[::-1].copy(), output=output)
    assert r.status == "pass" and "forward mode: torch's jvp agrees" in r.message, r.message
    r = run(bad.apply, x=X, y=X[::-1].copy(), output=output)
    assert r.status == "fail" and "forward mode (torch's jvp) raised RuntimeError" in r.message, r.message
    assert "the jvp is not returning a view" in r.message


# --- an output whose dtype or shape moves with the inputs -----------------------------------------

def dtype_switch(x):
    y = torch.sin(x) * 2
    return y.float() if x.sum() > X.sum() else y  # float32 as soon as the sum grows


def dtype_far(x):
    y = torch.sin(x) * 2
    return y.float() if x.sum() > X.sum() + 10 else y


def shape_switch(x):
    return torch.sin(x[x >= 0.5])  # x[0] is 0.5: a step down drops it


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_an_output_whose_dtype_or_shape_moves_fails_saying_so(mode):
    assert "same dtype" in gradcheck(dtype_switch, leaf(X))
    r = run(dtype_switch, x=X, framework="torch", mode=mode)
    assert r.status == "fail" and "the output changes dtype when the inputs move" in r.message, r.message
    assert "float64 at the inputs, float32" in r.message
    assert "same shape" in gradcheck(shape_switch, leaf(X))
    r = run(shape_switch, x=X, framework="torch", mode=mode)
    assert r.status == "fail" and "the output changes shape when the inputs move" in r.message, r.message
    assert gradcheck(dtype_far, leaf(X)) == "pass"
    assert run(dtype_far, x=X, framework="torch", mode=mode).status == "pass"
    r = run(lambda x: np.sin(x[x >= 0.5]), x=X, mode=mode)  # numpy checks too
    assert r.status == "fail" and "changes shape" in r.message, r.message


# --- None read as zero ----------------------------------------------------------------------------

class TwiceX(torch.autograd.Function):
    """y is not used: its derivative is 0, and None says so."""

    @staticmethod
    def forward(ctx, x, y):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None


class XTimesYNoneForY(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, None


def test_none_from_a_backward_is_zero_and_judged_by_the_derivative():
    y = X[::-1].copy()
    assert gradcheck(TwiceX.apply, leaf(X), leaf(y)) == "pass"
    r = run(TwiceX.apply, x=X, y=y)
    assert r.status == "pass", r.message
    assert any("gives None for y" in n for n in r.notes)
    assert "Jacobian mismatch" in gradcheck(XTimesYNoneForY.apply, leaf(X), leaf(y))
    r = run(XTimesYNoneForY.apply, x=X, y=y)
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"y"}, r.message
    assert "gives None for y" in r.message and "its derivative is not 0" in r.message


# --- every run looks like training: tensor hooks ---------------------------------------------------

def hook_scales(x):
    y = x * 2
    y.register_hook(lambda g: g * 3)  # part of what backward computes: the gradient comes out 3 times too big
    return torch.sin(y)


def hook_watches(x):
    y = torch.exp(x)
    seen = []
    y.register_hook(seen.append)
    return y * 2


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_functions_that_register_tensor_hooks_are_checked(mode):
    assert "Jacobian mismatch" in gradcheck(hook_scales, leaf(X))
    r = run(hook_scales, x=X, framework="torch", mode=mode)
    assert r.status == "fail", r.message
    assert gradcheck(hook_watches, leaf(X)) == "pass"
    r = run(hook_watches, x=X, framework="torch", mode=mode)
    assert r.status == "pass", r.message


# --- reentrance: the same graph twice ------------------------------------------------------------

class NoisyOnCtx(torch.autograd.Function):
    """Each forward starts a generator of its own, so two fresh graphs agree; the same graph twice does not."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.gen = torch.Generator().manual_seed(0)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x * (1 + 1e-9 * torch.rand(x.shape, generator=ctx.gen, dtype=x.dtype))


class CountsOnCtx(NoisyOnCtx):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.calls = itertools.count(1)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x * next(ctx.calls)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_backward_that_keeps_state_on_ctx_fails_as_not_reentrant(mode):
    for fn in (NoisyOnCtx, CountsOnCtx):
        assert "Backward is not reentrant" in gradcheck(fn.apply, leaf(X))
        r = run(fn.apply, x=X, mode=mode)
        assert r.status == "fail" and "not deterministic" in r.message, (fn.__name__, r.message)
    assert gradcheck(NoisyOnCtx.apply, leaf(X), nondet_tol=1e-6) == "pass"
    assert run(NoisyOnCtx.apply, x=X, mode=mode, nondet_tol=1e-6).status == "pass"


class TwiceXG(torch.autograd.Function):
    """g * 2x, whose own backward (the double backward of SquareCountingTwice) counts its calls on ctx."""

    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        ctx.calls = itertools.count(1)
        return g * 2 * x

    @staticmethod
    def backward(ctx, h):
        g, x = ctx.saved_tensors
        k = next(ctx.calls)
        return h * 2 * x * k, h * 2 * g * k


class SquareCountingTwice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return TwiceXG.apply(g, x)


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_a_double_backward_that_keeps_state_on_ctx_fails_at_order_two(mode):
    assert gradcheck(SquareCountingTwice.apply, leaf(X)) == "pass"
    assert "Backward is not reentrant" in gradcheck(SquareCountingTwice.apply, leaf(X), second=True)
    r = run(SquareCountingTwice.apply, x=X, mode=mode, order=2)
    assert r.status == "fail" and "torch's double backward is not deterministic" in r.message, r.message


# --- once_differentiable, told by what torch does ------------------------------------------------

class CubeW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, k):
        ctx.save_for_backward(x, w)
        return x ** 3 * w * k

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * 3 * x ** 2 * w * 2, g * x ** 3 * 2, None


class CubeWOnce(CubeW):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * 3 * x ** 2 * w * 2, g * x ** 3 * 2, None  # three outputs, the last None


W = torch.tensor([0.3, -1.2, 0.8, 2.0], dtype=torch.float64, requires_grad=True)  # a leaf the inputs are not


class ScaleByWDetachedG(torch.autograd.Function):
    """Its backward depends on a tensor outside the inputs and on neither the inputs nor the cotangent."""

    @staticmethod
    def forward(ctx, x):
        return x * W.detach()

    @staticmethod
    def backward(ctx, g):
        return g.detach() * W


def test_order_two_skips_once_differentiable_by_torchs_own_error():
    def plain(x):
        return torch.tanh(x) * x

    assert gradcheck(plain, leaf(X), second=True) == "pass"
    r = run(plain, x=X, framework="torch", order=2)
    assert r.status == "pass", r.message
    f = lambda x, w: CubeW.apply(x, w, 2)  # noqa: E731
    assert gradcheck(f, leaf(X), leaf(X[::-1].copy()), second=True) == "pass"
    r = run(CubeW.apply, x=X, w=X[::-1].copy(), k=2, order=2)
    assert r.status == "pass", r.message
    r = run(CubeWOnce.apply, x=X, w=X[::-1].copy(), k=2, order=2)
    assert r.status == "skipped" and "once_differentiable" in r.message, r.message
    # a gradient cut off from the inputs and the cotangent without once_differentiable: not skipped, wrong
    assert "Jacobian mismatch" in gradcheck(ScaleByWDetachedG.apply, leaf(X), second=True)
    r = run(ScaleByWDetachedG.apply, x=X, order=2)
    assert r.status == "fail" and "cotangent" in r.message, r.message
    assert W.grad is None  # the probe touched no tensor of the user's


# --- complex inputs, in torch's convention ---------------------------------------------------------

class AbsSquared(torch.autograd.Function):
    """|z|^2, real: torch's gradient is dL/dRe z + i dL/dIm z = 2 z g."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z


class AbsSquaredConjugated(AbsSquared):
    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z.conj()


class Squared(torch.autograd.Function):
    """z^2, a complex output: torch's vjp is g * conj(2 z)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * (2 * z).conj()


class SquaredNoConj(Squared):
    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * 2 * z


Z = np.array([0.5 - 1.25j, -0.75 + 0.5j, 1.5 + 0.25j])


@pytest.mark.parametrize("mode", ["full", "fast"])
def test_complex_inputs_are_checked_as_gradcheck_does(mode):
    for good, bad in ((AbsSquared, AbsSquaredConjugated), (Squared, SquaredNoConj)):
        assert gradcheck(good.apply, leaf(Z, torch.complex128)) == "pass"
        assert gradcheck(bad.apply, leaf(Z, torch.complex128)).startswith("fail")
        r = run(good.apply, z=torch.tensor(Z), mode=mode)
        assert r.status == "pass", r.message
        assert any("z: complex, checked as real and imaginary parts" in n for n in r.notes)
        r = run(bad.apply, z=torch.tensor(Z), mode=mode)
        assert r.status == "fail" and {m.input for m in r.mismatches} == {"z"}, r.message


def test_complex_inputs_beside_real_ones_and_in_complex64():
    def mixed(z, x):
        return torch.sin(z * x).abs() ** 2

    r = run(mixed, z=torch.tensor(Z), x=X[:3], framework="torch")
    assert r.status == "pass" and r.dtype == "float64", r.message
    r = run(mixed, z=torch.tensor(Z, dtype=torch.complex64), x=X[:3], framework="torch")
    assert r.status == "pass" and r.dtype == "float32", r.message  # complex64: float32's tolerance
    r = run(Squared.apply, z=torch.tensor(Z), order=2)
    assert r.status == "skipped" and "order=2 is not checked for complex inputs" in r.message
