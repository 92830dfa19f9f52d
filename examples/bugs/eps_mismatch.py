"""BUG: wrong by about 1e-3 relative. Layer normalisation adds eps = 1e-3 to the variance in the forward
pass, but the backward pass normalises by the standard deviation without it. Every gradient is off by
roughly eps / (2 var): small enough to look right in a printout, and exactly what a tolerance-aware
check is for (inputs x and gamma).
"""
import numpy as np

import gradcli

EPS = 1e-3


@gradcli.check(x=(3, 16), gamma=(16,), beta=(16,))
def layernorm(x, gamma, beta):
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + EPS) + beta


@layernorm.vjp
def layernorm_vjp(g, x, gamma, beta):
    n = x.shape[1]
    mu = x.mean(axis=1, keepdims=True)
    inv_std = 1.0 / np.sqrt(x.var(axis=1, keepdims=True))  # should be var + EPS, as in the forward pass
    xhat = (x - mu) * inv_std
    dxhat = g * gamma
    dx = inv_std / n * (n * dxhat - dxhat.sum(axis=1, keepdims=True)
                        - xhat * (dxhat * xhat).sum(axis=1, keepdims=True))
    return dx, (g * xhat).sum(axis=0), g.sum(axis=0)
