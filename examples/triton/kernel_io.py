"""What the Triton examples share: the interpreter switch, the dtype rounding that a low-precision
accumulator does, and the way tensors go into and come out of a kernel.

Without a GPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set here before
triton is imported). The interpreter does float16 faithfully but not bfloat16: it adds the raw
16-bit patterns of bf16 values and truncates float32 -> bf16 conversions. So under the interpreter
a bf16 tensor goes into a kernel as its exact float32 copy, the kernel computes in float32 as it
would on a GPU, and its float32 result is rounded to bf16 by torch (round to nearest even, what
the GPU's store does). On a GPU, bf16 tensors go in and come out as they are.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402 - the interpreter switch must be set first
import triton.language as tl  # noqa: E402

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

# the dtype an accumulator is rounded to after every add: 0 = float32 (the right way), 1 = float16,
# 2 = bfloat16 (the bug of accumulating in the input's dtype)
F32, F16, BF16 = 0, 1, 2
_CODES = {torch.float16: F16, torch.bfloat16: BF16}


def low_code(dtype) -> int:
    """The accumulator code of an input dtype: what a kernel that sums in that dtype rounds to."""
    return _CODES.get(dtype, F32)


def into_kernel(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor the kernel can read faithfully: bf16 becomes its exact float32 copy under
    the interpreter."""
    if INTERPRETED and t.dtype == torch.bfloat16:
        t = t.float()
    return t.contiguous()


def out_buffer(like: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    """The buffer a kernel stores into: the input's dtype, except bf16 under the interpreter (float32,
    rounded afterwards by ``out_of_kernel``)."""
    dtype = dtype or like.dtype
    if INTERPRETED and dtype == torch.bfloat16:
        dtype = torch.float32
    return torch.empty(like.shape if shape is None else shape, dtype=dtype, device=like.device)


def out_of_kernel(t: torch.Tensor, dtype) -> torch.Tensor:
    """The kernel's result in the dtype it stands for (a no-op except bf16 under the interpreter)."""
    return t.to(dtype)


@triton.jit
def _round_bf16(x):
    # Veltkamp's split: c - (c - x) keeps x's leading 8 significant bits, rounded to nearest, in plain
    # float32 arithmetic (exact on the interpreter and on a GPU; integer bit tricks are slow to
    # interpret). Ties may go either way, a difference only on exact halfway sums.
    c = x * 65537.0
    return c - (c - x)


@triton.jit
def round_acc(x, ACC: tl.constexpr):
    """x (float32) as an accumulator of dtype ACC holds it: rounded to float16 or bfloat16, or as is."""
    if ACC == 1:
        x = x.to(tl.float16).to(tl.float32)
    elif ACC == 2:
        x = _round_bf16(x)
    return x


@triton.jit
def _add_f16(a, b):
    return (a + b).to(tl.float16).to(tl.float32)


@triton.jit
def _add_bf16(a, b):
    return _round_bf16(a + b)


@triton.jit
def acc_sum(x, axis: tl.constexpr, ACC: tl.constexpr):
    """The sum of x along axis, every partial sum rounded to the accumulator dtype ACC."""
    if ACC == 1:
        s = tl.reduce(round_acc(x, ACC), axis, _add_f16)
    elif ACC == 2:
        s = tl.reduce(round_acc(x, ACC), axis, _add_bf16)
    else:
        s = tl.sum(x, axis)
    return s
