"""An affine (fully connected) layer, y = x @ W + b, with its hand-written vector-Jacobian product.

The output is a (batch, out) array, so gradcli checks the vjp: for a cotangent g of the output's
shape, vjp(g, x, W, b) must return (g @ W.T, x.T @ g, g.sum(axis=0)), one array per input.
"""
import numpy as np

import gradcli


@gradcli.check(x=(5, 4), W=(4, 3), b=(3,))
def affine(x, W, b):
    return x @ W + b


@affine.vjp
def affine_vjp(g, x, W, b):
    dx = g @ W.T
    dW = x.T @ g
    db = g.sum(axis=0)
    return dx, dW, db


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    print(affine(rng.normal(size=(2, 4)), rng.normal(size=(4, 3)), np.zeros(3)))
