"""BUG: a sum over the wrong axis. The bias gradient of an affine layer sums the output gradient over
the features (axis=1) instead of over the batch (axis=0).

With a batch of 4 and 4 output features the shapes agree, so only the check catches it (input b).
"""
import gradcli


@gradcli.check(x=(4, 3), W=(3, 4), b=(4,))
def dense(x, W, b):
    return x @ W + b


@dense.vjp
def dense_vjp(g, x, W, b):
    return g @ W.T, x.T @ g, g.sum(axis=1)  # should be g.sum(axis=0)
