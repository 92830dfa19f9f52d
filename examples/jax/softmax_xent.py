"""Fused softmax cross-entropy as a jax.custom_vjp: the batch mean of -log softmax(z)[label].

``softmax_xent`` is right (passes): its bwd is (softmax(z) - onehot(labels)) / batch.
``softmax_xent_no_batch_divide`` is the bug (fails on z): its bwd forgets the division by the batch
size that the forward's mean implies, so the gradient is 4 times too large here. The integer labels
are a constant of the check (the bwd returns None for them).
"""
import jax
import jax.numpy as jnp
import numpy as np

import gradcli

LABELS = np.array([1, 0, 4, 2])  # numpy, not jnp: a jax array made at import would start JAX's runtime


@jax.jit
def _xent(z, labels):
    return -jnp.take_along_axis(jax.nn.log_softmax(z, axis=1), labels[:, None], axis=1).mean()


def _fwd(z, labels):
    return _xent(z, labels), (z, labels)


@jax.jit
def _delta(z, labels):
    return jax.nn.softmax(z, axis=1) - jax.nn.one_hot(labels, z.shape[1], dtype=z.dtype)


@jax.custom_vjp
def softmax_xent(z, labels):
    return _xent(z, labels)


@jax.custom_vjp
def softmax_xent_no_batch_divide(z, labels):
    return _xent(z, labels)


softmax_xent.defvjp(_fwd, lambda res, g: (g * _delta(*res) / res[0].shape[0], None))
softmax_xent_no_batch_divide.defvjp(_fwd, lambda res, g: (g * _delta(*res), None))

gradcli.check(softmax_xent, z=(4, 5), labels=LABELS)
gradcli.check(softmax_xent_no_batch_divide, z=(4, 5), labels=LABELS)
