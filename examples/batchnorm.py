"""Batch normalisation (training mode) with the compact backward pass from the original paper.

out = gamma * (x - mean) / sqrt(var + eps) + beta, statistics over the batch axis. The vjp is the
classic three-term formula for dx; every term matters, since mean and var depend on x too.
"""
import numpy as np

import gradcli

EPS = 1e-5


@gradcli.check(x=(8, 3), gamma=(3,), beta=(3,))
def batchnorm(x, gamma, beta):
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    xhat = (x - mu) / np.sqrt(var + EPS)
    return gamma * xhat + beta


@batchnorm.vjp
def batchnorm_vjp(g, x, gamma, beta):
    n = x.shape[0]
    mu = x.mean(axis=0)
    inv_std = 1.0 / np.sqrt(x.var(axis=0) + EPS)
    xhat = (x - mu) * inv_std
    dgamma = (g * xhat).sum(axis=0)
    dbeta = g.sum(axis=0)
    dxhat = g * gamma
    dx = inv_std / n * (n * dxhat - dxhat.sum(axis=0) - xhat * (dxhat * xhat).sum(axis=0))
    return dx, dgamma, dbeta
