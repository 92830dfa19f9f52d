"""Softmax cross-entropy of a linear classifier, averaged over the batch, with integer class labels.

The labels are an integer input, so they are a constant: the gradient is checked with respect to
the features X and the weights W (every floating-point input), returned as a dict by name.
"""
import numpy as np

import gradcli

LABELS = np.array([0, 2, 1, 2, 0, 1])


def _softmax(z):
    z = z - z.max(axis=1, keepdims=True)  # for overflow; it does not change the result
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@gradcli.check(X=(6, 4), W=(4, 3), y=LABELS)
def softmax_ce(X, W, y):
    p = _softmax(X @ W)
    n = X.shape[0]
    return -np.mean(np.log(p[np.arange(n), y]))


@softmax_ce.grad
def softmax_ce_grad(X, W, y):
    n = X.shape[0]
    dz = _softmax(X @ W)
    dz[np.arange(n), y] -= 1
    dz /= n
    return {"X": dz @ W.T, "W": X.T @ dz}
