"""Single-head scaled dot-product self-attention, softmax(Q K^T / sqrt(d)) V with Q, K, V = x Wq, x Wk, x Wv.

The backward pass goes through the row-wise softmax (dS = P * (dP - sum(dP * P))) and collects x's
gradient from all three projections; the vjp returns gradients for x, Wq, Wk and Wv.
"""
import numpy as np

import gradcli


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@gradcli.check(x=(4, 5), Wq=(5, 3), Wk=(5, 3), Wv=(5, 3))
def attention(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    p = _softmax(q @ k.T / np.sqrt(q.shape[1]))
    return p @ v


@attention.vjp
def attention_vjp(g, x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    scale = 1.0 / np.sqrt(q.shape[1])
    p = _softmax(q @ k.T * scale)
    dv = p.T @ g
    dp = g @ v.T
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True)) * scale
    dq = ds @ k
    dk = ds.T @ q
    dx = dq @ Wq.T + dk @ Wk.T + dv @ Wv.T
    return dx, x.T @ dq, x.T @ dk, x.T @ dv
