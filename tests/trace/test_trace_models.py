"""Realistic model code traced end to end: FD agreement and <u, vjp(v)> = <jvp(u), v>."""
from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import check_against_numerics, check_transpose

rng = np.random.default_rng(7)


def affine_tanh(x, W, b):
    return np.tanh(x @ W + b)


def softmax_xent(X, W, y):
    scores = X.dot(W)
    scores = scores - np.max(scores, axis=1, keepdims=True)  # the usual stabilisation
    lse = np.log(np.sum(np.exp(scores), axis=1))
    n = X.shape[0]
    return -np.mean(scores[np.arange(n), y] - lse) + 0.1 * np.sum(W * W)


def batch_norm(x, gamma, beta):
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    return gamma * xhat + beta


def rnn(xs, h0, Wx, Wh, b):
    h, hs = h0, []
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        hs.append(h)
    return np.stack(hs, axis=0).sum(axis=0), h


def attention(q, k, v):
    d = q.shape[-1]
    scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return np.einsum("bqk,bkd->bqd", w, v)


def mlp(X, W1, b1, W2, b2, y):
    h = np.maximum(0, X @ W1 + b1)
    out = h @ W2 + b2
    return 0.5 * np.sum((out - y) ** 2) / len(X)


def embedding_scatter(E, tokens, segments, W):
    # bag of words: sum the token embeddings of each segment with np.add.at into a plain buffer
    pooled = np.zeros((3, E.shape[1]))
    np.add.at(pooled, segments, E[tokens])
    return np.sum(np.tanh(pooled @ W) ** 2)


def embedding_scatter_traced(E, tokens, W):
    grad_like = np.zeros_like(E) + 0.0 * E  # a traced buffer: np.add.at updates it functionally
    np.add.at(grad_like, tokens, (E[tokens] @ W) @ W.T)
    return np.linalg.norm(grad_like, axis=1)


N, D, H, C = 5, 4, 3, 3
MODELS = {
    "affine_tanh": (affine_tanh, dict(x=rng.normal(size=(N, D)), W=rng.normal(size=(D, H)), b=rng.normal(size=H)),
                    ["x", "W", "b"], None),
    "softmax_xent": (softmax_xent, dict(X=rng.normal(size=(N, D)), W=rng.normal(size=(D, C)),
                                        y=np.array([0, 2, 1, 2, 0])), ["X", "W"], None),
    "batch_norm": (batch_norm, dict(x=rng.normal(size=(N, D)), gamma=rng.normal(size=D), beta=rng.normal(size=D)),
                   ["x", "gamma", "beta"], None),
    "rnn": (rnn, dict(xs=rng.normal(size=(4, 2, D)), h0=rng.normal(size=(2, H)), Wx=rng.normal(size=(D, H)) * 0.5,
                      Wh=rng.normal(size=(H, H)) * 0.5, b=rng.normal(size=H)), ["xs", "h0", "Wx", "Wh", "b"], 0),
    "rnn_last": (rnn, dict(xs=rng.normal(size=(3, 2, D)), h0=rng.normal(size=(2, H)), Wx=rng.normal(size=(D, H)),
                           Wh=rng.normal(size=(H, H)), b=rng.normal(size=H)), ["Wx", "Wh"], 1),
    "attention": (attention, dict(q=rng.normal(size=(2, 3, D)), k=rng.normal(size=(2, 4, D)), v=rng.normal(size=(2, 4, D))),
                  ["q", "k", "v"], None),
    "mlp_relu": (mlp, dict(X=rng.normal(size=(N, D)), W1=rng.normal(size=(D, 6)), b1=rng.normal(size=6) * 0.1,
                           W2=rng.normal(size=(6, 2)), b2=rng.normal(size=2), y=rng.normal(size=(N, 2))),
                 ["W1", "b1", "W2", "b2"], None),
    "embedding_scatter": (embedding_scatter, dict(E=rng.normal(size=(6, D)), tokens=np.array([0, 3, 3, 5, 1, 0]),
                                                  segments=np.array([0, 0, 1, 2, 2, 2]), W=rng.normal(size=(D, 2))),
                          ["E", "W"], None),
    "embedding_scatter_traced": (embedding_scatter_traced, dict(E=rng.normal(size=(6, D)), tokens=np.array([0, 3, 3, 5]),
                                                                W=rng.normal(size=(D, 2))), ["E", "W"], None),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_model_transpose_identity(name):
    fn, inputs, wrt, output = MODELS[name]
    check_transpose(fn, inputs, wrt, output=output)


@pytest.mark.parametrize("name", list(MODELS))
def test_model_against_central_differences(name):
    fn, inputs, wrt, output = MODELS[name]
    check_against_numerics(fn, inputs, wrt, output=output)


def test_scalar_loss_gradient_shapes():
    fn, inputs, wrt, _ = MODELS["softmax_xent"]
    from gradcli.trace import trace

    t = trace(fn, inputs, wrt)
    g = t.gradient()
    assert set(g) == {"X", "W"} and g["W"].shape == (D, C) and g["X"].shape == (N, D)
