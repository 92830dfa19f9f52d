"""A causal-attention torch.autograd.Function at shape (1, 2, 5, 4): softmax(q k^T / sqrt(d) + causal
mask) v with a hand-written backward, on q, k and v (120 input elements). The speed case of
benchmarks/frameworks.py (--attention) and a model file of its own:

    gradcli check benchmarks/causal_attention.py
"""
import math

import torch

import gradcli

SHAPE = (1, 2, 5, 4)  # batch, heads, positions, head width


def _probs(q, k):
    n, d = q.shape[-2], q.shape[-1]
    hidden = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    s = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1)


class CausalAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        p = _probs(q, k)
        ctx.save_for_backward(q, k, v, p)
        return p @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        c = 1 / math.sqrt(q.shape[-1])
        dv = p.transpose(-1, -2) @ g
        dp = g @ v.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        return ds @ k * c, ds.transpose(-1, -2) @ q * c, dv


gradcli.check(CausalAttention.apply, q=SHAPE, k=SHAPE, v=SHAPE)
