"""The runnable example of docs/frameworks.md: a torch Function with a bug beside a JAX custom_vjp that
is right.

``Softplus`` is softplus(x) = log(1 + e^x) with a hand-written backward that uses sigmoid(-x) where the
derivative is sigmoid(x) (fails). ``logcosh`` is sum(log(cosh(x))) with the bwd g * tanh(x) (passes).
"""
import jax
import jax.numpy as jnp
import torch

import gradcli


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(-x)  # the bug: softplus' is sigmoid(x)


@jax.custom_vjp
def logcosh(x):
    return jnp.sum(jnp.log(jnp.cosh(x)))


def logcosh_fwd(x):
    return logcosh(x), x


def logcosh_bwd(x, g):
    return (g * jnp.tanh(x),)


logcosh.defvjp(logcosh_fwd, logcosh_bwd)

gradcli.check(Softplus.apply, x=(2, 3))
gradcli.check(logcosh, x=(5,))
