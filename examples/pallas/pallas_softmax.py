"""Row-wise fused softmax written with Pallas (jax.experimental.pallas), forward and backward
kernels wrapped in jax.custom_vjp. Without a TPU or GPU the kernels run in Pallas' interpreter
(``interpret=True``), which executes them with XLA on the CPU, float16 and bfloat16 included.

The forward keeps a running max and one running sum per lane over the row's column blocks (an
online softmax, float32), then writes exp(x - lse) in the input's dtype and keeps each row's
float32 log-sum-exp lse; the backward recomputes y from x and lse (as flash attention does) and
returns dx = y * (dy - sum(dy * y)). ``pallas_softmax`` is right; ``pallas_softmax_low_acc`` is its twin
whose sums accumulate in the input's dtype (every partial sum rounded to float16 or bfloat16).
``softmax_reference`` is jax.nn.softmax in the input's dtype.

(Named pallas_softmax.py, not softmax.py: the Triton example of the same name lives in
examples/triton/, and both are imported by their bare names from the model files next to them.)
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 16  # columns per step: narrower than the rows checked, as in the Triton example
ROWS = 64  # rows per program
INTERPRET = jax.default_backend() == "cpu"
F32 = jnp.float32


def _acc_add(a, b, acc):
    """a + b as an accumulator of dtype acc holds it (the exact float32 sum, rounded once)."""
    return (a.astype(F32) + b.astype(F32)).astype(acc)


def _lane_sum(s):
    """The sum over the lanes (last axis, a power of two wide), pairwise, each partial sum in s's dtype."""
    while s.shape[-1] > 1:
        half = s.shape[-1] // 2
        s = _acc_add(s[:, :half], s[:, half:], s.dtype)
    return s.astype(F32)


def _forward_kernel(x_ref, y_ref, lse_ref, *, acc):
    rows, n = x_ref.shape

    def step(j, carry):
        m, s = carry
        x = x_ref[:, pl.ds(j * BLOCK, BLOCK)].astype(F32)
        m_new = jnp.maximum(m, x.max(axis=1, keepdims=True))
        s = (s.astype(F32) * jnp.exp(m - m_new)).astype(acc)
        return m_new, _acc_add(s, jnp.exp(x - m_new).astype(acc), acc)

    start = (jnp.full((rows, 1), -jnp.inf, F32), jnp.zeros((rows, BLOCK), acc))
    m, s = jax.lax.fori_loop(0, n // BLOCK, step, start)
    lse = m + jnp.log(_lane_sum(s))
    lse_ref[...] = lse
    y_ref[...] = jnp.exp(x_ref[...].astype(F32) - lse).astype(y_ref.dtype)


def _backward_kernel(x_ref, lse_ref, dy_ref, dx_ref, *, acc):
    # y again from x and the row's float32 log-sum-exp, not the stored (rounded) output: the
    # backward's error is then one rounding of dx, as in a reference computed at float32
    rows, n = x_ref.shape
    lse = lse_ref[...]

    def step(j, dot):
        cols = pl.ds(j * BLOCK, BLOCK)
        y = jnp.exp(x_ref[:, cols].astype(F32) - lse)
        return _acc_add(dot, (y * dy_ref[:, cols].astype(F32)).astype(acc), acc)

    dot = _lane_sum(jax.lax.fori_loop(0, n // BLOCK, step, jnp.zeros((rows, BLOCK), acc)))
    y = jnp.exp(x_ref[...].astype(F32) - lse)
    dx_ref[...] = (y * (dy_ref[...].astype(F32) - dot)).astype(dx_ref.dtype)


def _padded(t, value):
    """t as (rows, cols) padded to whole programs and blocks (value in the new columns, 0 in new rows)."""
    t = t.reshape(-1, t.shape[-1])
    cols = -t.shape[1] % BLOCK
    t = jnp.pad(t, ((0, 0), (0, cols)), constant_values=value)
    return jnp.pad(t, ((0, -t.shape[0] % ROWS), (0, 0)))


def _spec(t):
    return pl.BlockSpec((ROWS, t.shape[1]), lambda i: (i, 0))


@functools.partial(jax.jit, static_argnums=1)  # traced once per shape and dtype, not at every call
def _forward(x, low_acc):
    """(y, the padded x, each row's float32 log-sum-exp)."""
    acc = x.dtype if low_acc else F32
    xp = _padded(x, -jnp.inf)  # padded columns: exp(-inf) adds nothing
    lse_shape = jax.ShapeDtypeStruct((xp.shape[0], 1), F32)
    y, lse = pl.pallas_call(
        functools.partial(_forward_kernel, acc=acc), grid=(xp.shape[0] // ROWS,),
        out_shape=(jax.ShapeDtypeStruct(xp.shape, x.dtype), lse_shape), in_specs=[_spec(xp)],
        out_specs=(_spec(xp), _spec(lse_shape)), interpret=INTERPRET)(xp)
    return y[: x.size // x.shape[-1], : x.shape[-1]].reshape(x.shape), xp, lse


@functools.partial(jax.jit, static_argnums=2)
def _backward(saved, dy, low_acc):
    xp, lse = saved
    acc = xp.dtype if low_acc else F32
    dyp = _padded(dy.astype(xp.dtype), 0.0)
    dx = pl.pallas_call(
        functools.partial(_backward_kernel, acc=acc), grid=(xp.shape[0] // ROWS,),
        out_shape=jax.ShapeDtypeStruct(xp.shape, xp.dtype), in_specs=[_spec(xp), _spec(lse), _spec(dyp)],
        out_specs=_spec(xp), interpret=INTERPRET)(xp, lse, dyp)
    return dx[: dy.size // dy.shape[-1], : dy.shape[-1]].reshape(dy.shape)


def _with_residuals(low_acc):
    def fwd(x):
        y, xp, lse = _forward(x, low_acc)
        return y, (xp, lse)
    return fwd


@jax.custom_vjp
def pallas_softmax(x):
    """softmax(x) over the last axis: online forward, fused backward, float32 sums."""
    return _forward(x, False)[0]


pallas_softmax.defvjp(_with_residuals(False), lambda saved, dy: (_backward(saved, dy, False),))


@jax.custom_vjp
def pallas_softmax_low_acc(x):
    """Bug: the forward's sum and the backward's sum(dy * y) accumulate in the input's dtype."""
    return _forward(x, True)[0]


pallas_softmax_low_acc.defvjp(_with_residuals(True), lambda saved, dy: (_backward(saved, dy, True),))


def softmax_reference(x):
    """The plain implementation in x's dtype, computed at float32 or wider and rounded once (what
    torch.softmax does inside). jax.nn.softmax on float16 input rounds exp(x - max) to float16 before
    summing: a bar loose enough that the low-precision accumulation of the twin stays within it."""
    wide = jnp.promote_types(x.dtype, jnp.float32)
    return jax.nn.softmax(x.astype(wide), axis=-1).astype(x.dtype)
