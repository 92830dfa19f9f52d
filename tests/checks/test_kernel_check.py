"""reference= checks: a low-precision kernel against a plain implementation run in its dtype and in float64.

The kernels here are torch Functions written as fused kernels are (float32 inside, results stored in the
input's dtype, their own backward), each with the classic bug of its kind as a twin; the Triton and Pallas
versions of the same are in examples/ (tests/kernels). A fixed tolerance would have to be tuned per dtype,
size and point; the criterion must tell each twin from its correct kernel on its own.
"""
import json
import math

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput

torch = pytest.importorskip("torch")


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _low_sum(v, dtype):
    """Sum over the last axis with every partial sum rounded to ``dtype`` (a bf16/fp16 accumulator)."""
    s = torch.zeros(v.shape[:-1], dtype=dtype)
    for j in range(v.shape[-1]):
        s = (s.float() + v[..., j]).to(dtype)
    return s.float()


class Softmax(torch.autograd.Function):
    """Row softmax, float32 inside, stored in the input's dtype; dx = y * (dy - sum(dy * y))."""
    low_acc = False

    @classmethod
    def _sum(cls, v, dtype):
        return _low_sum(v, dtype) if cls.low_acc else v.sum(-1)

    @staticmethod
    def forward(ctx, x):
        cls = ctx._forward_cls
        x32 = x.float()
        e = torch.exp(x32 - x32.max(-1, keepdim=True).values)
        y = (e / cls._sum(e, x.dtype)[..., None]).to(x.dtype)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        y32, dy32 = y.float(), dy.float()
        dot = ctx._forward_cls._sum(dy32 * y32, y.dtype)
        return (y32 * (dy32 - dot[..., None])).to(y.dtype)


class SoftmaxLowAcc(Softmax):
    """The sums accumulated in the input's dtype."""
    low_acc = True


class SoftmaxNoRescale(Softmax):
    """An online softmax over blocks of 16 columns that forgets to rescale the running sum when the
    running max grows."""

    @staticmethod
    def forward(ctx, x):
        x32 = x.float()
        m = torch.full(x.shape[:-1] + (1,), -math.inf)
        s = torch.zeros(x.shape[:-1] + (1,))
        for j in range(0, x.shape[-1], 16):
            block = x32[..., j:j + 16]
            m_new = torch.maximum(m, block.max(-1, keepdim=True).values)
            s = s + torch.exp(block - m_new).sum(-1, keepdim=True)  # missing: s * exp(m - m_new)
            m = m_new
        y = (torch.exp(x32 - m) / s).to(x.dtype)
        ctx.save_for_backward(y)
        return y


def softmax_reference(x):
    return torch.softmax(x, -1)


class LayerNorm(torch.autograd.Function):
    """Layer norm over the last axis with weight and bias; the backward recomputes the statistics with
    ``bwd_eps`` (the forward's, 1e-5, when right)."""
    bwd_eps = 1e-5

    @staticmethod
    def forward(ctx, x, weight, bias):
        x32 = x.float()
        mean = x32.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x32 - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        ctx.save_for_backward(x, weight)
        return ((x32 - mean) * rstd * weight.float() + bias.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        x32, dy32, w32 = x.float(), dy.float(), weight.float()
        mean = x32.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x32 - mean) ** 2).mean(-1, keepdim=True) + ctx._forward_cls.bwd_eps)
        xhat = (x32 - mean) * rstd
        g = dy32 * w32
        dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        dims = tuple(range(x.dim() - 1))
        return dx.to(x.dtype), (dy32 * xhat).sum(dims).to(weight.dtype), dy32.sum(dims).to(weight.dtype)


class LayerNormBwdEps(LayerNorm):
    bwd_eps = 1e-3


def layernorm_reference(x, weight, bias):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, 1e-5)


class Attention(torch.autograd.Function):
    """Causal single-head attention softmax(q k^T / sqrt(d) + mask) v, float32 inside."""
    offset, dq_scaled = 0, True

    @staticmethod
    def _probs(q, k, offset):
        n, d = q.shape[-2], q.shape[-1]
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        keep = torch.ones(n, n, dtype=torch.bool).tril(offset)
        return torch.softmax(s.masked_fill(~keep, -math.inf), -1)

    @staticmethod
    def forward(ctx, q, k, v):
        cls = ctx._forward_cls
        q32, k32, v32 = q.float(), k.float(), v.float()
        p = Attention._probs(q32, k32, cls.offset)
        ctx.save_for_backward(q, k, v)
        return (p @ v32).to(q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        cls = ctx._forward_cls
        q32, k32, v32, do32 = q.float(), k.float(), v.float(), do.float()
        p = Attention._probs(q32, k32, cls.offset)
        dv = p.transpose(-1, -2) @ do32
        dp = do32 @ v32.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        scale = 1 / math.sqrt(q.shape[-1])
        dq = ds @ k32 * (scale if cls.dq_scaled else 1.0)
        dk = ds.transpose(-1, -2) @ q32 * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class AttentionMaskOffByOne(Attention):
    offset = 1


class AttentionDqUnscaled(Attention):
    dq_scaled = False


def attention_reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


SOFTMAX = dict(reference=softmax_reference)
LAYERNORM = dict(reference=layernorm_reference, x=(8, 64), weight=(64,), bias=(64,))
# activations of small variance, where an epsilon of 1e-3 instead of 1e-5 matters
QUIET = dict(LAYERNORM, domain={"x": (-0.05, 0.05)})
ATTENTION = dict(reference=attention_reference, q=(16, 8), k=(16, 8), v=(16, 8))
DTYPES = ["float16", "bfloat16"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel, kw", [
    (Softmax, dict(SOFTMAX, x=(4, 32))), (Softmax, dict(SOFTMAX, x=(2, 512))),
    (LayerNorm, LAYERNORM), (LayerNorm, QUIET), (LayerNorm, dict(LAYERNORM, x=(2, 3, 256), weight=(256,), bias=(256,))),
    (Attention, ATTENTION), (Attention, dict(ATTENTION, q=(2, 32, 16), k=(2, 32, 16), v=(2, 32, 16))),
], ids=["softmax-32", "softmax-512", "layernorm-64", "layernorm-quiet", "layernorm-256", "attention-16",
        "attention-32"])
def test_correct_kernels_pass_at_several_sizes(kernel, kw, dtype):
    r = run(kernel, dtype=dtype, **kw)
    assert r.status == "pass", r.message
    assert r.kind == "reference" and r.dtype == dtype
    assert [q.name for q in r.kernel][0] == "output" and all(q.passed for q in r.kernel)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel, kw, wrong", [
    (SoftmaxLowAcc, dict(SOFTMAX, x=(2, 512)), "output"),
    (SoftmaxNoRescale, dict(SOFTMAX, x=(4, 64)), "output"),
    (LayerNormBwdEps, QUIET, "x"),
    (AttentionMaskOffByOne, ATTENTION, "output"),
    (AttentionDqUnscaled, ATTENTION, "q"),
], ids=["reduction in low precision", "online softmax not rescaled", "backward eps", "mask off by one",
        "dq without 1/sqrt(d)"])
def test_each_bug_class_fails_on_the_quantity_it_spoils(kernel, kw, wrong, dtype):
    r = run(kernel, dtype=dtype, **kw)
    assert r.status == "fail", r.message
    spoiled = {q.name for q in r.kernel if not q.passed}
    assert wrong in spoiled, (spoiled, r.message)
    q = next(q for q in r.kernel if q.name == wrong)
    assert q.kernel_error > q.allowed and q.reference_error > 0
    assert ("the output" if wrong == "output" else f"the gradient of {wrong}") in r.message


def test_the_unscaled_dq_spoils_q_alone():
    r = run(AttentionDqUnscaled, dtype="float16", **ATTENTION)
    assert {q.name for q in r.kernel if not q.passed} == {"q"}


def test_the_criterion_is_the_measured_reference_error():
    # the allowed error is factor x the same-dtype reference's, plus the dtype's subnormal spacing: a
    # larger factor passes what the default fails, and the report's numbers are the runs' own
    r = run(SoftmaxLowAcc, dtype="bfloat16", **dict(SOFTMAX, x=(2, 512)))
    q = r.kernel[0]
    assert q.allowed == pytest.approx(2 * q.reference_error + 2.0 ** -7 * 2.0 ** -126)
    ratio = q.kernel_error / q.reference_error
    loose = run(SoftmaxLowAcc, dtype="bfloat16", factor=math.ceil(ratio * 1.01 + 1), **dict(SOFTMAX, x=(2, 512)))
    assert loose.kernel[0].passed
    # the truth is float64 at the point rounded through the dtype: torch's own float64 softmax there
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 512))).to(torch.bfloat16)
    truth = torch.softmax(x.double(), -1)
    assert q.scale == pytest.approx(float(truth.abs().max()), rel=1e-12)


def test_the_kernel_error_is_measured_against_float64_not_against_the_reference():
    r = run(Softmax, dtype="float16", **dict(SOFTMAX, x=(4, 32)))
    q = r.kernel[0]
    assert 0 < q.kernel_error < 2.0 ** -10  # float16 rounding of entries below 1
    assert q.digits(q.kernel_error) > 2


def test_a_wrong_reference_is_no_yardstick():
    class WrongReference(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.softmax(x, -1)

        @staticmethod
        def backward(ctx, g):
            return g  # not the softmax's derivative

    r = run(Softmax, reference=WrongReference.apply, dtype="float16", x=(2, 8))
    assert r.status == "error" and "the reference does not pass its own float64 check (fail" in r.message


def test_a_kernel_that_raises_is_an_error():
    class Raises(Softmax):
        @staticmethod
        def forward(ctx, x):
            raise RuntimeError("out of shared memory")

    r = run(Raises, reference=softmax_reference, dtype="float16", x=(2, 8))
    assert r.status == "error" and "out of shared memory" in r.message


def test_an_output_of_another_shape_fails():
    def flat(x):
        return torch.softmax(x, -1).reshape(-1)
    r = run(flat, reference=softmax_reference, framework="torch", dtype="float16", x=(2, 8))
    assert r.status == "fail" and "shape" in r.message


def test_a_missing_gradient_is_read_as_zero_and_fails_where_it_is_not():
    class NoBiasGrad(LayerNorm):
        @staticmethod
        def backward(ctx, dy):
            dx, dw, _ = LayerNorm.backward(ctx, dy)
            return dx, dw, None

    r = run(NoBiasGrad, dtype="float16", **LAYERNORM)
    assert r.status == "fail" and [q.name for q in r.kernel if not q.passed] == ["bias"]
    assert any("None for bias" in n for n in r.notes)


@pytest.mark.parametrize("kw, message", [
    (dict(reference=3), "reference= takes a function"),
    (dict(reference=softmax_reference, mode="fast"), "mode= does not apply with reference="),
    (dict(reference=softmax_reference, rtol=1e-2), "rtol= does not apply"),
    (dict(reference=softmax_reference, order=2), "order=2 does not apply"),
    (dict(reference=softmax_reference, factor=0.5), "factor must be a number >= 1"),
    (dict(factor=3), "factor= scales the tolerance of a reference= check"),
    (dict(reference=softmax_reference, vjp=lambda g, x: g), "drop grad=/vjp=/hvp="),
])
def test_what_a_kernel_check_cannot_take_is_refused_at_registration(kw, message):
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_spec(Softmax if "vjp" not in kw else softmax_reference, x=(2, 8), **kw)


def test_a_plain_function_needs_its_framework_named():
    r = run(softmax_reference, reference=softmax_reference, x=(2, 8))
    assert r.status == "error" and "framework='torch'" in r.message


def test_the_json_document_holds_the_compared_quantities():
    jsonschema = pytest.importorskip("jsonschema")
    from importlib.resources import files
    r = run(LayerNormBwdEps, dtype="bfloat16", **QUIET)
    schema = json.loads((files("gradcli") / "schemas" / "check.json").read_text())
    doc = r.to_dict()
    jsonschema.validate({"checks": [doc], "summary": {k: 0 for k in (
        "passed", "failed", "inconclusive", "errors", "skipped", "nondifferentiable", "undefined", "total")}},
        schema)
    names = [q["name"] for q in doc["kernel"]]
    assert names == ["output", "x", "weight", "bias"] and doc["kind"] == "reference" and doc["dtype"] == "bfloat16"
    assert not next(q for q in doc["kernel"] if q["name"] == "x")["passed"]


def test_a_jax_kernel_with_a_low_precision_reduction_fails_and_its_fix_passes():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def make(low):
        def total(v):
            if not low:
                return v.astype(jnp.float32).sum(-1)
            s = jnp.zeros(v.shape[:-1], v.dtype)
            for j in range(v.shape[-1]):
                s = (s.astype(jnp.float32) + v[..., j].astype(jnp.float32)).astype(v.dtype)
            return s.astype(jnp.float32)

        @jax.custom_vjp
        def softmax(x):
            e = jnp.exp(x.astype(jnp.float32) - x.astype(jnp.float32).max(-1, keepdims=True))
            return (e / total(e.astype(x.dtype) if low else e)[..., None]).astype(x.dtype)

        def fwd(x):
            y = softmax(x)
            return y, y

        def bwd(y, dy):
            y32, dy32 = y.astype(jnp.float32), dy.astype(jnp.float32)
            dot = total((dy32 * y32).astype(y.dtype) if low else dy32 * y32)
            return ((y32 * (dy32 - dot[..., None])).astype(y.dtype),)

        softmax.defvjp(fwd, bwd)
        return softmax

    ref = lambda x: jax.nn.softmax(x, axis=-1)
    good = run(make(False), reference=ref, dtype="bfloat16", x=(2, 256))
    assert good.status == "pass", good.message
    bad = run(make(True), reference=ref, dtype="bfloat16", x=(2, 256))
    assert bad.status == "fail", bad.message


class FusedLayerNorm(torch.nn.Module):
    """A module around the fused Function: its weight and bias are parameters, checked by name."""

    def __init__(self, n, function=LayerNorm):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float64))
        self.bias = torch.nn.Parameter(torch.linspace(-0.2, 0.2, n, dtype=torch.float64))
        self.function = function

    def forward(self, x):
        return self.function.apply(x, self.weight, self.bias)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_module_kernel_has_its_parameters_checked_by_name(dtype):
    module = FusedLayerNorm(64)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    r = run(module, reference=layernorm_reference, dtype=dtype, x=(8, 64), domain={"x": (-0.05, 0.05)})
    assert r.status == "pass", r.message
    assert [q.name for q in r.kernel] == ["output", "x", "weight", "bias"]
    assert all(torch.equal(before[n], p) and p.dtype == torch.float64 for n, p in module.named_parameters())
    wrong = run(FusedLayerNorm(64, LayerNormBwdEps), reference=layernorm_reference, dtype=dtype, x=(8, 64),
                domain={"x": (-0.05, 0.05)})
    assert wrong.status == "fail" and "x" in {q.name for q in wrong.kernel if not q.passed}, wrong.message
