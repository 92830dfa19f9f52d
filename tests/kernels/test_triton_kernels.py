"""The Triton example kernels (examples/triton/), run on the CPU by Triton's interpreter, checked as a
user checks them: ``gradcli.check(kernel, reference=..., dtype=...)``. Every right kernel passes in float16
and bfloat16; every buggy twin fails on the quantity its bug spoils. The sizes are the smallest at which
each bug shows on every draw tried (the reduction in the input's dtype needs rows of 512 over 64 rows: on
shorter rows such sums lose too little to tell from the reference's own rounding).

bfloat16 runs go through the kernels' float32 path and are rounded by torch (examples/triton/
kernel_io.py): the interpreter's own bf16 arithmetic and conversion are not what a GPU does.
"""
import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None:  # not imported here: kernel_io must set the interpreter first
    pytest.skip("needs triton (pip install '.[triton]')", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "triton"))

import kernel_io  # noqa: E402 - before triton: it switches the interpreter on without a GPU
import attention  # noqa: E402
import layernorm  # noqa: E402
import softmax  # noqa: E402
import triton  # noqa: E402

from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402

tl = triton.language
DEVICE = "cpu" if kernel_io.INTERPRETED else "cuda"
DTYPES = ["float16", "bfloat16"]
ROWS = dict(x=(8, 64))
LONG_ROWS = dict(x=(64, 512))
NORM = dict(x=(8, 64), weight=(64,), bias=(64,))
QKV = dict(q=(32, 16), k=(32, 16), v=(32, 16))
SOFTMAX, LAYERNORM = softmax.softmax_reference, layernorm.layernorm_reference
ATTN, ATTN_DROP = attention.attention_reference, attention.attention_dropout_reference

RIGHT = [(softmax.TritonSoftmax, SOFTMAX, ROWS), (softmax.TritonSoftmax, SOFTMAX, LONG_ROWS),
         (layernorm.TritonLayerNorm, LAYERNORM, NORM), (attention.TritonAttention, ATTN, QKV),
         (attention.TritonAttentionDropout, ATTN_DROP, QKV)]
# (twin, reference, inputs, the quantities its bug must spoil)
BUGGY = [(softmax.TritonSoftmaxNoRescale, SOFTMAX, ROWS, {"output", "x"}),
         (softmax.TritonSoftmaxLowAcc, SOFTMAX, LONG_ROWS, {"output"}),
         (layernorm.TritonLayerNormBwdEps, LAYERNORM, NORM, {"x"}),
         (attention.TritonAttentionMaskOffByOne, ATTN, QKV, {"output", "q", "k", "v"}),
         (attention.TritonAttentionDqNoScale, ATTN, QKV, {"q"}),
         (attention.TritonAttentionDropoutReseeded, ATTN_DROP, QKV, {"q", "k", "v"})]


def check(kernel, reference, inputs, dtype):
    return run_check(build_spec(kernel, reference=reference, dtype=dtype, device=DEVICE, **inputs), {})


def _id(case):
    return f"{case[0].__name__}-{'x'.join(map(str, next(iter(case[2].values()))))}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", RIGHT, ids=_id)
def test_right_kernels_pass(case, dtype):
    r = check(*case, dtype)
    assert r.status == "pass", r.message


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", BUGGY, ids=_id)
def test_buggy_twins_fail_where_their_bug_shows(case, dtype):
    *run, spoiled = case
    r = check(*run, dtype)
    assert r.status == "fail", r.message
    assert spoiled <= {q.name for q in r.kernel if not q.passed}, r.message
    if case[0] is attention.TritonAttentionDqNoScale:  # dq alone: the forward and dk, dv are right
        assert {q.name for q in r.kernel if not q.passed} == {"q"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_low_precision_accumulator_rounds_as_torch_does(dtype):
    # the accumulate-in-the-input-dtype twin rounds inside the kernel: it must round to nearest even
    # like torch's conversion, halfway cases included (sums of two values of the dtype)
    tdtype = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(1)
    wide = torch.randn(4096, generator=gen) * 10.0 ** torch.randint(-5, 5, (4096,), generator=gen)
    halves = torch.randn(2, 4096, generator=gen).to(tdtype).float().sum(0)
    x = torch.cat([wide, halves]).to(DEVICE)
    y = torch.empty_like(x)
    _round_kernel[(1,)](x, y, x.numel(), kernel_io.low_code(tdtype), BLOCK=triton.next_power_of_2(x.numel()))
    assert torch.equal(y, x.to(tdtype).float())


@triton.jit
def _round_kernel(X, Y, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, kernel_io.round_acc(tl.load(X + offs, mask=offs < n), ACC), mask=offs < n)
