"""Attention scores q k^T / sqrt(d) as a jax.custom_vjp, with as many queries as keys (3 of each),
so that a missing transpose leaves every shape right.

``attention_scores`` is right (passes). ``attention_scores_missing_scale`` is a bug (fails on q): its
bwd leaves the 1/sqrt(d) out of q's gradient. ``attention_scores_missing_transpose`` is a bug (fails
on k): its bwd uses g where k's gradient needs g^T.
"""
import math

import jax

import gradcli


@jax.jit
def _scores(q, k):
    return q @ k.T / math.sqrt(q.shape[1])


def _fwd(q, k):
    return _scores(q, k), (q, k)


@jax.jit
def _bwd(res, g):
    q, k = res
    c = math.sqrt(q.shape[1])
    return g @ k / c, g.T @ q / c


@jax.jit
def _bwd_missing_scale(res, g):
    q, k = res
    return g @ k, g.T @ q / math.sqrt(q.shape[1])


@jax.jit
def _bwd_missing_transpose(res, g):
    q, k = res
    c = math.sqrt(q.shape[1])
    return g @ k / c, g @ q / c


@jax.custom_vjp
def attention_scores(q, k):
    return _scores(q, k)


@jax.custom_vjp
def attention_scores_missing_scale(q, k):
    return _scores(q, k)


@jax.custom_vjp
def attention_scores_missing_transpose(q, k):
    return _scores(q, k)


attention_scores.defvjp(_fwd, _bwd)
attention_scores_missing_scale.defvjp(_fwd, _bwd_missing_scale)
attention_scores_missing_transpose.defvjp(_fwd, _bwd_missing_transpose)

gradcli.check(attention_scores, q=(3, 4), k=(3, 4))
gradcli.check(attention_scores_missing_scale, q=(3, 4), k=(3, 4))
gradcli.check(attention_scores_missing_transpose, q=(3, 4), k=(3, 4))
