"""RMSNorm as a jax.custom_vjp, y = x / sqrt(mean(x^2) + eps) * w over the last axis.

``rmsnorm`` is right (passes). ``rmsnorm_eps_mismatch`` is the bug (fails on x and w): its bwd
recomputes the root mean square with eps=1e-3 where the forward used 1e-5, so both gradients are off
by about the difference over mean(x^2). ``rmsnorm_block`` is a plain function of jax arrays that calls
the right rule, checked with ``framework="jax"`` in float32 (passes).
"""
import jax
import jax.numpy as jnp

import gradcli

EPS = 1e-5


@jax.jit
def _rmsnorm(x, w):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def _fwd(x, w):
    return _rmsnorm(x, w), (x, w)


@jax.jit
def _grads(g, x, w, eps):
    r = jnp.sqrt((x * x).mean(-1, keepdims=True) + eps)  # recomputed from x, as a bwd may
    xh, gxh = x / r, g * w
    return (gxh - xh * (gxh * xh).mean(-1, keepdims=True)) / r, (g * xh).sum(0)


@jax.custom_vjp
def rmsnorm(x, w):
    return _rmsnorm(x, w)


@jax.custom_vjp
def rmsnorm_eps_mismatch(x, w):
    return _rmsnorm(x, w)


rmsnorm.defvjp(_fwd, lambda res, g: _grads(g, *res, EPS))
rmsnorm_eps_mismatch.defvjp(_fwd, lambda res, g: _grads(g, *res, 1e-3))  # the forward's eps is 1e-5

gradcli.check(rmsnorm, x=(3, 6), w=(6,))
gradcli.check(rmsnorm_eps_mismatch, x=(3, 6), w=(6,))


@gradcli.check(x=(3, 6), framework="jax", dtype="float32")
def rmsnorm_block(x):
    return rmsnorm(jnp.tanh(x), jnp.linspace(0.5, 1.5, 6, dtype=x.dtype))
