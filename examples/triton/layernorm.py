"""Layer norm over the last dim, with weight and bias, as a torch.autograd.Function with Triton
forward and backward kernels.

The forward computes each row's mean and rstd = 1 / sqrt(var + eps) in float32, stores y in the
input's dtype and keeps mean and rstd for the backward. The backward kernel computes dx and each
row's share of dweight and dbias (float32); torch sums the shares over the rows.

``TritonLayerNorm`` is right. ``TritonLayerNormBwdEps`` is its twin whose backward recomputes the
statistics from x with another epsilon (0.1 instead of the forward's 1e-5) instead of reading the
saved ones. The slip changes rstd by about (0.1 - 1e-5) / (2 var): on rows of unit variance that
is a few float16 or bfloat16 ulps; a smaller epsilon slip (1e-3) on such rows sits below what
float16 carries and is no error a dtype-bound check can see, only rows of small variance show it.
``layernorm_reference`` is torch.nn.functional.layer_norm.
"""
import torch

from kernel_io import into_kernel, out_buffer, out_of_kernel, tl, triton

EPS = 1e-5
BUGGY_BWD_EPS = 0.1
BLOCK = 16
ROWS = 16


@triton.jit
def _row_stats(X, rows, n_cols, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    """Mean and 1 / sqrt(var + eps) of each row, in float32, two passes (no cancellation)."""
    total = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        total += tl.load(X + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(total, 1)[:, None] / n_cols
    squares = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        x = tl.load(X + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        squares += tl.where(cols < n_cols, (x - mean) * (x - mean), 0.0)
    return mean, 1.0 / tl.sqrt(tl.sum(squares, 1)[:, None] / n_cols + eps)


@triton.jit
def _layernorm_fwd(X, W, B, Y, MEAN, RSTD, n_rows, n_cols, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    live = rows < n_rows
    rows = tl.minimum(rows, n_rows - 1)  # spare lanes redo the last row, never stored
    mean, rstd = _row_stats(X, rows, n_cols, eps, BLOCK, ROWS)
    tl.store(MEAN + rows, mean, mask=live)
    tl.store(RSTD + rows, rstd, mask=live)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        inside = live & (cols < n_cols)
        x = tl.load(X + rows * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        b = tl.load(B + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        tl.store(Y + rows * n_cols + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=inside)


@triton.jit
def _layernorm_bwd(X, W, DY, MEAN, RSTD, DX, DW_ROWS, DB_ROWS, n_rows, n_cols, bwd_eps,
                   BLOCK: tl.constexpr, ROWS: tl.constexpr, RECOMPUTE: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    live = rows < n_rows
    rows = tl.minimum(rows, n_rows - 1)
    if RECOMPUTE:
        mean, rstd = _row_stats(X, rows, n_cols, bwd_eps, BLOCK, ROWS)
    else:
        mean = tl.load(MEAN + rows)
        rstd = tl.load(RSTD + rows)
    c1 = tl.zeros([ROWS, BLOCK], tl.float32)
    c2 = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        x = tl.load(X + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        c1 += (x - mean) * rstd * w * dy
        c2 += w * dy
    c1 = tl.sum(c1, 1)[:, None] / n_cols
    c2 = tl.sum(c2, 1)[:, None] / n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)[None, :]
        inside = live & (cols < n_cols)
        x = tl.load(X + rows * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
        xhat = (x - mean) * rstd
        dx = (w * dy - (xhat * c1 + c2)) * rstd
        tl.store(DX + rows * n_cols + cols, dx.to(DX.dtype.element_ty), mask=inside)
        tl.store(DW_ROWS + rows * n_cols + cols, dy * xhat, mask=inside)
        tl.store(DB_ROWS + rows * n_cols + cols, dy, mask=inside)


def _grid(rows):
    return (triton.cdiv(rows, ROWS),)


def _forward(ctx, x, weight, bias, recompute):
    n = x.shape[-1]
    xk = into_kernel(x.reshape(-1, n))
    wk, bk = into_kernel(weight), into_kernel(bias)
    y = out_buffer(xk, dtype=x.dtype)
    mean = torch.empty(xk.shape[0], dtype=torch.float32, device=x.device)
    rstd = torch.empty_like(mean)
    _layernorm_fwd[_grid(xk.shape[0])](xk, wk, bk, y, mean, rstd, *xk.shape, EPS, BLOCK=BLOCK, ROWS=ROWS)
    ctx.save_for_backward(x, weight, mean, rstd)
    ctx.recompute = recompute
    return out_of_kernel(y, x.dtype).reshape(x.shape)


def _backward(ctx, dy):
    x, weight, mean, rstd = ctx.saved_tensors
    n = x.shape[-1]
    xk, wk = into_kernel(x.reshape(-1, n)), into_kernel(weight)
    dyk = into_kernel(dy.to(x.dtype).reshape(-1, n))
    dx = out_buffer(xk, dtype=x.dtype)
    dw_rows = torch.empty(xk.shape, dtype=torch.float32, device=x.device)
    db_rows = torch.empty_like(dw_rows)
    _layernorm_bwd[_grid(xk.shape[0])](xk, wk, dyk, mean, rstd, dx, dw_rows, db_rows, *xk.shape, BUGGY_BWD_EPS,
                                       BLOCK=BLOCK, ROWS=ROWS, RECOMPUTE=ctx.recompute)
    dweight, dbias = dw_rows.sum(0).to(weight.dtype), db_rows.sum(0).to(weight.dtype)
    return out_of_kernel(dx, x.dtype).reshape(x.shape), dweight, dbias


class TritonLayerNorm(torch.autograd.Function):
    """layer_norm(x, weight, bias) over the last dim, eps = 1e-5; the backward reads the saved stats."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        return _forward(ctx, x, weight, bias, recompute=False)

    @staticmethod
    def backward(ctx, dy):
        return _backward(ctx, dy)


class TritonLayerNormBwdEps(TritonLayerNorm):
    """Bug: the backward recomputes mean and rstd from x with eps = 0.1."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        return _forward(ctx, x, weight, bias, recompute=True)


def layernorm_reference(x, weight, bias):
    """The plain implementation, in x's dtype."""
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, EPS)
