"""torch targets: a custom autograd.Function's backward (or autograd's own) checked against gradcli's numerics."""
import sys

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput

torch = pytest.importorskip("torch")


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _gelu_parts(x):
    c = np.sqrt(2.0 / np.pi)
    u = c * (x + 0.044715 * x ** 3)
    t = torch.tanh(u)
    du = c * (1 + 3 * 0.044715 * x ** 2)
    return t, 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * du


class Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + _gelu_parts(x)[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _gelu_parts(x)[1]


class GeluForgetsGradOutput(Gelu):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _gelu_parts(x)[1]


class RMSNorm(torch.autograd.Function):
    """y = x / rms(x) * w over the last axis, x: (n, d), w: (d,)."""

    @staticmethod
    def forward(ctx, x, w):
        r = torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        ctx.save_for_backward(x, w, r)
        return x / r * w

    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        xh = x / r
        gxh = g * w
        gx = (gxh - xh * (gxh * xh).mean(-1, keepdim=True)) / r
        return gx, (g * xh).sum(0)


class RMSNormWrongDim(RMSNorm):
    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        xh = x / r
        gxh = g * w
        gx = (gxh - xh * (gxh * xh).mean(0, keepdim=True)) / r  # the reduction over the wrong axis
        return gx, (g * xh).sum(0)


class RMSNormDropsW(RMSNorm):
    @staticmethod
    def backward(ctx, g):
        gx, _ = RMSNorm.backward(ctx, g)
        return gx, None


class RMSNormOneGradient(RMSNorm):
    @staticmethod
    def backward(ctx, g):
        return RMSNorm.backward(ctx, g)[0]


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, W):
        ctx.save_for_backward(x, W)
        return x @ W

    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T, x.T @ g


class LinearMissingTranspose(Linear):
    @staticmethod
    def backward(ctx, g):
        x, W = ctx.saved_tensors
        return g @ W.T, (g.T @ x).reshape(W.shape)  # a square W hides the shape error: only the values are wrong


def test_correct_functions_pass_in_both_call_forms():
    assert run(Gelu.apply, x=(5, 3)).status == "pass"
    r = run(RMSNorm.apply, x=(4, 8), w=(8,))
    assert r.status == "pass", r.message
    assert r.name == "RMSNorm" and r.kind == "vjp" and build_spec(RMSNorm.apply, x=(4, 8), w=(8,)).kind == "vjp"
    assert run(Linear, x=(3, 4), W=(4, 4)).status == "pass"  # the class itself, not only .apply


@pytest.mark.parametrize("target, inputs, bad", [
    (LinearMissingTranspose.apply, {"x": (3, 4), "W": (4, 4)}, "W"),
    (GeluForgetsGradOutput.apply, {"x": (5, 3)}, "x"),
    (RMSNormWrongDim.apply, {"x": (4, 8), "w": (8,)}, "x"),
])
def test_buggy_backwards_fail_naming_the_input(target, inputs, bad):
    r = run(target, **inputs)
    assert r.status == "fail", r.message
    assert r.mismatches and {m.input for m in r.mismatches} == {bad}


def test_none_for_an_input_that_needs_a_gradient_fails_naming_it():
    r = run(RMSNormDropsW.apply, x=(4, 8), w=(8,))
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"w"}, r.message
    assert "torch's backward gives None for w" in r.message and "its derivative is not 0" in r.message
    assert run(RMSNormDropsW.apply, x=(4, 8), w=(8,), wrt=["x"]).status == "pass"


def test_wrong_number_of_gradients_fails_with_torchs_message():
    r = run(RMSNormOneGradient.apply, x=(4, 8), w=(8,))
    assert r.status == "fail"
    assert "incorrect number of gradients" in r.message


def test_plain_function_of_tensors_uses_autograds_backward():
    def layer(x, W, b):
        return torch.tanh(x @ W + b), x.sum()

    r = run(layer, x=(3, 4), W=(4, 2), b=(2,), framework="torch")
    assert r.status == "pass", r.message
    assert run(layer, x=(3, 4), W=(4, 2), b=(2,), framework="torch", output=1).status == "pass"
    # an input the output never reaches: zero gradient, not a None failure
    assert run(lambda x, y: (x * x).sum(), x=(3,), y=(2,), framework="torch").status == "pass"
    # a detached path: torch's gradient is wrong, and the numerics say so
    r = run(lambda x: torch.from_numpy(x.detach().numpy() ** 2).sum() + x.sum(), x=(3,), framework="torch")
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x"}


def test_inputs_bind_by_name_or_by_position():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            a, b = args
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    assert run(Scale.apply, p=(3,), q=(3,)).status == "pass"  # positional, in the order given
    assert run(RMSNorm.apply, w=(8,), x=(4, 8)).status == "pass"  # by name, whatever the order
    assert run(torch.sin, x=(4,), framework="torch").status == "pass"  # a builtin: positional


def test_bad_torch_checks_are_refused_at_registration():
    with pytest.raises(BadInput, match="no parameter 'z'"):
        build_spec(RMSNorm.apply, x=(4, 8), z=(8,))
    with pytest.raises(BadInput, match="no value for parameter 'w'"):
        build_spec(RMSNorm.apply, x=(4, 8))
    with pytest.raises(BadInput, match="torch's own gradients"):
        build_spec(Gelu.apply, vjp=lambda g, x: g, x=(3,))
    with pytest.raises(BadInput, match="framework must be"):
        build_spec(Gelu.apply, x=(3,), framework="tensorflow")
    with pytest.raises(BadInput, match="is a torch.autograd.Function .*framework='jax' cannot check it"):
        build_spec(Gelu.apply, x=(3,), framework="jax")
    with pytest.raises(BadInput, match="dtype must be one of"):
        build_spec(Gelu.apply, x=(3,), dtype="int8")
    with pytest.raises(BadInput, match="float64 or float32 for a numpy check"):
        build_spec(lambda x: x, x=(3,), dtype="bf16")
    with pytest.raises(BadInput, match="autocast must be"):
        build_spec(Gelu.apply, x=(3,), autocast="int8")
    with pytest.raises(BadInput, match="applies to torch checks only"):
        build_spec(lambda x: x, x=(3,), device="cuda")
    for device in ("cuda:abc", "cuda:", "cuda:-1", "cpu:0:1", " cuda"):
        with pytest.raises(BadInput, match="device must be"):
            build_spec(Gelu.apply, x=(3,), device=device)
    for device in ("cpu", "cuda", "cuda:0", "cuda:12"):
        build_spec(Gelu.apply, x=(3,), device=device)


def test_without_torch_the_check_is_an_error_naming_the_extra(monkeypatch):
    spec = build_spec(lambda x: x * 2, x=(3,), framework="torch")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    r = run_check(spec, {})
    assert r.status == "error"
    assert "pip install 'gradcli[torch]'" in r.message
    assert run(lambda x: np.sum(x ** 2), x=(3,)).status == "pass"  # numpy checks still run


def test_decorating_a_function_class_leaves_its_backward_alone(monkeypatch):
    import gradcli.checks.registry as registry

    found = []
    monkeypatch.setattr(registry, "REGISTRY", found)

    @registry.check(x=(3, 4), W=(4, 2))
    class Affine(Linear):
        pass

    assert Affine.vjp is torch.autograd.Function.vjp  # no gradcli registrar over torch's alias of backward
    assert run_check(found[0], {}).status == "pass"


def test_fast_mode_and_order_two():
    r = run(RMSNormWrongDim.apply, x=(4, 8), w=(8,), mode="fast")
    assert r.status == "fail" and r.mode == "fast" and {m.input for m in r.mismatches} == {"x"}, r.message
    r = run(Gelu.apply, x=(4,), order=2)
    assert r.status == "pass", r.message


def test_torch_ad_of_forward_is_a_second_reference_trusted_where_the_differences_agree():
    r = run(RMSNorm.apply, x=(4, 8), w=(8,))
    assert r.reference == "torch_autograd" and r.methods["torch_autograd"].status == "used"
    assert run(lambda x: torch.tanh(x).sum(), x=(3,), framework="torch").reference == "richardson"

    class DetachedForward(torch.autograd.Function):
        """The forward hides part of itself from autograd; the hand-written backward is right."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.detach() ** 3 + x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (3 * x ** 2 + 1)

    r = run(DetachedForward.apply, x=(5,))
    assert r.status == "pass" and r.reference == "richardson", r.message
    assert any("torch's AD of forward disagrees" in n for n in r.notes)

    class InPlace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    r = run(InPlace.apply, x=(4,))
    assert r.status == "pass" and r.reference == "richardson", r.message
    assert any("cannot be had" in n and "in place" in n for n in r.notes)


def test_hand_written_gradients_with_tensors_are_checked_against_torch_and_the_differences(monkeypatch):
    import gradcli.checks.registry as registry

    found = []
    monkeypatch.setattr(registry, "REGISTRY", found)

    @registry.check(x=(3, 4), W=(4, 2), framework="torch")
    def layer(x, W):
        return torch.tanh(x @ W)

    @layer.vjp
    def layer_vjp(g, x, W):
        d = g * (1 - torch.tanh(x @ W) ** 2)
        return d @ W.T, x.T @ d

    @registry.check(x=(5,), framework="torch")
    def energy(x):
        return (x ** 3).sum()

    @energy.grad
    def energy_grad(x):
        return 3 * x * x

    @registry.check(x=(5,), framework="torch")
    def energy_bug(x):
        return (x ** 3).sum()

    energy_bug.grad(lambda x: 3 * x)  # the missing factor x
    r = [run_check(s, {}) for s in found]
    assert [x.status for x in r] == ["pass", "pass", "fail"], [x.message for x in r]
    assert [x.kind for x in r] == ["vjp", "grad", "grad"]
    assert r[0].reference == r[1].reference == "torch_autograd"
    assert {m.input for m in r[2].mismatches} == {"x"}
    with pytest.raises(BadInput, match="own gradients"):
        build_spec(Gelu.apply, grad=lambda x: x, x=(3,))


class SinOffAtOne(torch.autograd.Function):
    """sin, whose backward is ``off`` (relative) off at element ``at`` only."""
    at, off = 7, 1e-5

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = torch.cos(x).clone()
        d[ctx._forward_cls.at] *= 1 + ctx._forward_cls.off
        return g * d


class SinOffEverywhere(SinOffAtOne):
    at, off = slice(None), 1e-2


def test_a_backward_wrong_at_every_finite_element_fails_next_to_a_nan():
    x = torch.tensor([0.3, float("nan"), 1.2], dtype=torch.float64)
    r = run(SinOffEverywhere.apply, x=x)
    assert r.status == "fail" and "x[0]" in r.message
    assert any("x[1]: the input is nan" in n for n in r.notes)
    # torch's own gradcheck agrees on the finite elements
    with pytest.raises(Exception):
        torch.autograd.gradcheck(SinOffEverywhere.apply, (x[[0, 2]].clone().requires_grad_(),))


class GeluOff(Gelu):
    @staticmethod
    def backward(ctx, g):  # 0.5% off: elementwise, so autocast leaves it in float32
        return Gelu.backward(ctx, g) * 1.005


def test_autocast_judges_a_rule_in_the_dtype_its_operations_ran_in():
    x = torch.linspace(-2, 2, 12, dtype=torch.float64, requires_grad=True)
    with pytest.raises(Exception):  # torch's own gradcheck fails it
        torch.autograd.gradcheck(GeluOff.apply, (x,))
    for how in ({"dtype": "float32"}, {"autocast": "bf16"}, {"autocast": "fp16"}):
        r = run(GeluOff.apply, x=(3, 4), **how)
        assert r.status == "fail" and r.dtype == "float32", (how, r.message)
    # a matmul autocast did lower still gets the autocast dtype's tolerance
    torch.manual_seed(0)
    r = run(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()), x=(2, 4), autocast="bf16")
    assert r.status == "pass" and r.dtype == "bfloat16"


def test_fast_mode_states_what_it_can_miss():
    r = run(lambda x: torch.sin(x) * 2.0, x=(400,), framework="torch", mode="fast")
    # its own autograd is what is checked: the identity <u, J^T v> = <J u, v> alone decides, summing 400
    # terms, and says what it can miss
    assert r.status == "pass" and "resolution: one element of 400 wrong by less than about 2e-05" in r.message


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 400, dtype=torch.float64))

    def forward(self, x):
        return SinOffAtOne.apply(x * self.w)


def test_a_function_inside_a_function_or_module_is_compared_element_by_element():
    # 1e-5 at one element of 400 is below the identity's resolution (2e-5): torch's autograd of the
    # Function's forward is the reference element by element, as for the Function checked alone
    with pytest.raises(Exception):  # torch's own gradcheck finds the defect
        torch.autograd.gradcheck(SinOffAtOne.apply, (torch.linspace(0, 1, 10, dtype=torch.float64,
                                                                    requires_grad=True),), rtol=1e-7, atol=0)
    alone = run(SinOffAtOne.apply, x=(400,), mode="fast")
    assert alone.status == "fail" and "x[7]" in alone.message
    inside = run(lambda x: SinOffAtOne.apply(x) * 2.0, x=(400,), framework="torch", mode="fast")
    assert inside.status == "fail" and "x[7]" in inside.message, inside.message
    assert "forward of SinOffAtOne differentiated" in inside.message
    module = run(Scaled(), x=(400,), mode="fast")
    assert module.status == "fail" and "x: 1 of 400, w: 1 of 400" in module.message, module.message
    assert "SinOffAtOne" in SinOffAtOne.backward.__qualname__  # its own backward is back in place
    assert run(lambda x: Gelu.apply(x) * 2.0, x=(400,), framework="torch", mode="fast").status == "pass"
