"""Row-wise fused softmax as a torch.autograd.Function with Triton forward and backward kernels.

The forward is an online softmax: one pass over the row's column blocks keeps a running max and a
running sum (float32), rescaling the sum whenever the max grows; a second pass writes
exp(x - max) / sum in the input's dtype. The backward is dx = y * (dy - sum(dy * y)).

``TritonSoftmax`` is right. Its twins share the kernels, one flag each:
``TritonSoftmaxNoRescale`` forgets to rescale the running sum when the max changes (the blocks are
narrower than the rows, so the max does change), ``TritonSoftmaxLowAcc`` accumulates both sums in
the input's dtype (float16 or bfloat16) instead of float32. ``softmax_reference`` is plain torch.
"""
import torch

from kernel_io import F32, acc_sum, into_kernel, low_code, out_buffer, out_of_kernel, round_acc, tl, triton

BLOCK = 16  # narrower than the rows checked, so the online max changes across blocks
ROWS = 64  # rows per program: the interpreter runs programs one after the other, rows side by side


@triton.jit
def _softmax_fwd(X, Y, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, RESCALE: tl.constexpr,
                 ACC: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    live = rows < n_rows
    rows = tl.minimum(rows, n_rows - 1)  # spare lanes redo the last row (no -inf - -inf), never stored
    m = tl.full([ROWS, 1], float("-inf"), tl.float32)
    s = tl.zeros([ROWS, BLOCK], tl.float32)  # one running sum per lane, as fused kernels keep them
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        x = tl.load(X + rows * n_cols + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 1, keep_dims=True))
        if RESCALE:
            s = round_acc(s * tl.exp(m - m_new), ACC)
        s = round_acc(s + round_acc(tl.exp(x - m_new), ACC), ACC)
        m = m_new
    total = acc_sum(s, 1, ACC)[:, None]
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        inside = live & (cols < n_cols)
        x = tl.load(X + rows * n_cols + cols, mask=inside, other=float("-inf")).to(tl.float32)
        tl.store(Y + rows * n_cols + cols, (tl.exp(x - m) / total).to(Y.dtype.element_ty), mask=inside)


@triton.jit
def _softmax_bwd(Y, DY, DX, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    live = rows < n_rows
    rows = tl.minimum(rows, n_rows - 1)  # spare lanes redo the last row (no -inf - -inf), never stored
    dot = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        y = tl.load(Y + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        dot = round_acc(dot + round_acc(y * dy, ACC), ACC)
    total = acc_sum(dot, 1, ACC)[:, None]
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        inside = live & (cols < n_cols)
        y = tl.load(Y + rows * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(DX + rows * n_cols + cols, (y * (dy - total)).to(DX.dtype.element_ty), mask=inside)


def _grid(t):
    return (triton.cdiv(t.shape[0], ROWS),)


def _rows(t):
    return t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1)


def _forward(ctx, x, rescale, low_acc):
    xk = into_kernel(_rows(x))
    y = out_buffer(xk, dtype=x.dtype)
    acc = low_code(x.dtype) if low_acc else F32
    _softmax_fwd[_grid(xk)](xk, y, *xk.shape, ROWS=ROWS, BLOCK=BLOCK, RESCALE=rescale, ACC=acc)
    y = out_of_kernel(y, x.dtype).reshape(x.shape)
    ctx.save_for_backward(y)  # the stored, rounded y: what the backward of a fused kernel reads
    ctx.low_acc = low_acc
    return y


def _backward(ctx, dy):
    (y,) = ctx.saved_tensors
    yk, dyk = into_kernel(_rows(y)), into_kernel(_rows(dy.to(y.dtype)))
    dx = out_buffer(yk, dtype=y.dtype)
    acc = low_code(y.dtype) if ctx.low_acc else F32
    _softmax_bwd[_grid(yk)](yk, dyk, dx, *yk.shape, ROWS=ROWS, BLOCK=BLOCK, ACC=acc)
    return out_of_kernel(dx, y.dtype).reshape(y.shape)


class TritonSoftmax(torch.autograd.Function):
    """softmax(x) over the last dim: online forward, fused backward, float32 accumulation."""

    @staticmethod
    def forward(ctx, x):
        return _forward(ctx, x, rescale=True, low_acc=False)

    @staticmethod
    def backward(ctx, dy):
        return _backward(ctx, dy)


class TritonSoftmaxNoRescale(TritonSoftmax):
    """Bug: the running sum keeps its old scale when the running max grows."""

    @staticmethod
    def forward(ctx, x):
        return _forward(ctx, x, rescale=False, low_acc=False)


class TritonSoftmaxLowAcc(TritonSoftmax):
    """Bug: the forward's sum and the backward's sum(dy * y) accumulate in the input's dtype."""

    @staticmethod
    def forward(ctx, x):
        return _forward(ctx, x, rescale=True, low_acc=True)


def softmax_reference(x):
    """The plain implementation, in x's dtype."""
    return torch.softmax(x, dim=-1)
