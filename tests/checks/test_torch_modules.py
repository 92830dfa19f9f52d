"""torch modules, low precision and autocast: parameter gradients named as torch names them, the dtype
under test against the float64 reference, digits and underflow reported by input."""
import copy

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

torch = pytest.importorskip("torch")


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


class Scale(torch.autograd.Function):
    """y = x * w (w broadcast over rows)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


class ScaleWrongW(Scale):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).mean(0)  # mean where the forward broadcasts: off by the batch size


class ScaleNoW(Scale):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, None


class Scaled(torch.nn.Module):
    def __init__(self, fn, d=5):
        super().__init__()
        self.fn = fn
        self.lin = torch.nn.Linear(d, d)
        self.gain = torch.nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return torch.tanh(self.fn.apply(self.lin(x), self.gain))


def test_module_checks_inputs_and_every_parameter_by_torch_name():
    torch.manual_seed(0)
    m = Scaled(Scale)
    before = copy.deepcopy(m.state_dict())
    r = run(m, x=(3, 5))
    assert r.status == "pass", r.message
    assert r.name == "Scaled" and r.dtype == "float32"  # a module runs in its own dtype by default
    assert set(r.digits) == {"x", "lin.weight", "lin.bias", "gain"}
    assert all(v >= 5 for v in r.digits.values()), r.digits  # float32 gradients: ~7 digits
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # never modified in place
    assert m.gain.grad is None


def test_module_with_a_wrong_parameter_rule_fails_naming_that_parameter():
    torch.manual_seed(0)
    r = run(Scaled(ScaleWrongW), x=(3, 5))
    assert r.status == "fail", r.message
    assert {mm.input for mm in r.mismatches} == {"gain"}
    r = run(Scaled(ScaleNoW), x=(3, 5))
    assert r.status == "fail" and "None" in r.message and "gain" in r.message


def test_frozen_parameters_and_buffers_are_constants():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 2))
    m[0].weight.requires_grad_(False)
    stats = m[1].running_mean.clone()
    r = run(m, x=(5, 4))  # training mode: BatchNorm normalises by the batch and updates its statistics
    assert r.status == "pass", r.message
    # digits are reported for exactly the inputs checked: the frozen weight is not one of them
    assert set(r.digits) == {"x", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"}
    assert torch.equal(m[1].running_mean, stats)
    m.eval()  # eval mode: the affine map with the running statistics
    assert run(m, x=(5, 4)).status == "pass"


def test_dropout_in_training_mode_is_one_function_per_check():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Dropout(0.5), torch.nn.Tanh()).double().train()
    r = run(m, x=(4, 6))
    assert r.status == "pass", r.message


def test_float32_tolerance_passes_rounding_and_fails_a_cancellation_bug():
    class Softplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.nn.functional.softplus(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.sigmoid(x)

    class SoftplusCancels(Softplus):
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            # exp(x) / (1 + exp(x)) as 1 - 1/(1 + exp(x)): right in exact arithmetic, but for x << 0 the
            # difference of two numbers near 1 keeps few float32 digits
            return g * (1 - 1 / (1 + torch.exp(x)))

    x = np.linspace(-10.5, -9.5, 12)
    good = run(Softplus.apply, x=x, dtype="float32")
    assert good.status == "pass" and good.digits["x"] >= 6, (good.message, good.digits)
    bad = run(SoftplusCancels.apply, x=x, dtype="float32")
    assert bad.status == "fail", bad.message
    ref = 1 / (1 + np.exp(-x))  # the derivative, in float64
    got = (1 - 1 / (1 + np.exp(x.astype(np.float32)))).astype(np.float64)
    assert np.max(np.abs(got - ref) / ref) > 1e-3  # the bug is as large as the check says
    assert bad.digits["x"] < 3
    assert run(SoftplusCancels.apply, x=x).status == "pass"  # float64 has digits to spare


@pytest.mark.parametrize("dtype, holds", [("float16", 3.0), ("bfloat16", 2.0)])
def test_half_precision_is_judged_against_float64_with_digits(dtype, holds):
    torch.manual_seed(0)
    m = Scaled(Scale)
    r = run(m, x=(3, 5), dtype=dtype)
    assert r.status == "pass", r.message
    assert r.dtype == dtype
    assert all(holds - 1.5 <= v <= holds + 0.5 for v in r.digits.values()), r.digits
    assert run(Scaled(ScaleWrongW), x=(3, 5), dtype=dtype).status == "fail"


def test_a_given_tensor_keeps_its_dtype_and_numpy_arrays_take_dtype():
    x = torch.linspace(-1, 1, 10, dtype=torch.float64)
    seen = []

    def f(x, y):
        seen.append((x.dtype, y.dtype))
        return (x * y).sum()

    assert run(f, x=x, y=np.linspace(0, 1, 10), framework="torch", dtype="float32").status == "pass"
    assert (torch.float64, torch.float32) in seen


def test_autocast_reports_underflow_and_advises_loss_scaling():
    class TinyLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * 1e-7  # gradients of order 1e-7: subnormal in float16

    torch.manual_seed(0)
    plain = run(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()), x=(2, 4), autocast="bf16")
    assert plain.status == "pass", plain.message
    assert plain.dtype == "bfloat16" and plain.digits
    # float16 gradients of size 1e-9 flush to zero: the failure says so and names the cure
    r = run(TinyLoss(), x=(2, 4), dtype="float16")
    assert r.status == "fail"
    assert "the gradient underflows" in r.message and "GradScaler" in r.message
    assert max(r.underflow.values()) > 0
    # under autocast the matmuls run in float16 and their gradients, 1e-7 here, are subnormal there
    r = run(TinyLoss(), x=(2, 4), autocast="fp16")
    assert r.status == "fail" and "the gradient underflows" in r.message, r.message
    assert r.dtype == "float16" and r.underflow["x"] > 0


def test_absent_cuda_device_is_skipped_with_the_reason():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: this checks the machine without one")
    r = run(Scale.apply, x=(3, 5), w=(5,), device="cuda")
    assert r.status == "skipped" and "CUDA" in r.message


def test_a_module_binds_its_input_by_position():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).double()
    assert run(lin, inp=(4, 3)).status == "pass"  # forward(input): no name matches, so by position


MIXED = '''
import numpy as np
import torch
import gradcli

torch.manual_seed(0)

@gradcli.check(x=(3,))
def numpy_square(x):
    return np.sum(x ** 2)

numpy_square.grad(lambda x: 2 * x)

net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
gradcli.check(net, x=(2, 4))

@gradcli.check(x=(3, 4), framework="torch", dtype="float32")
def block(x):
    return torch.tanh(x).sum(-1)
'''


def test_a_model_file_mixes_numpy_and_torch_checks_and_autocast_from_the_cli(tmp_path):
    from cli_helpers import check, strict_json

    (tmp_path / "mixed.py").write_text(MIXED)
    # torch's thread pool running in this process before the model process forks: once hung the child
    a = torch.randn(300, 300)
    assert torch.isfinite(a @ a).all()
    res = check(tmp_path / "mixed.py", "--json")
    assert res.exit_code == 0, res.output
    doc = {c["name"]: c for c in strict_json(res.stdout)["checks"]}
    assert {k: c["status"] for k, c in doc.items()} == {"numpy_square": "pass", "Sequential": "pass", "block": "pass"}
    assert doc["Sequential"]["dtype"] == "float32" and set(doc["Sequential"]["digits"]) == {
        "x", "0.weight", "0.bias"}
    assert "digits" not in doc["numpy_square"]
    res = check(tmp_path / "mixed.py", "--json", "--autocast", "bf16")
    assert res.exit_code == 0, res.output
    doc = {c["name"]: c for c in strict_json(res.stdout)["checks"]}
    assert doc["Sequential"]["dtype"] == "bfloat16"
    assert doc["block"]["dtype"] == "float32"  # tanh and sum: autocast leaves them in float32
    assert "digits" not in doc["numpy_square"]  # autocast is for torch checks; numpy ones ignore it
    res = check(tmp_path / "mixed.py", "--autocast", "int8")
    assert res.exit_code == 2
