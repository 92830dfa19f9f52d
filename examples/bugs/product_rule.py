"""BUG: a dropped product-rule term. The SiLU (swish) activation x * sigmoid(x) differentiated as if
only the sigmoid depended on x: the sigmoid(x) term of d/dx [x * sigmoid(x)] is missing (input x).
"""
import numpy as np

import gradcli


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@gradcli.check(x=(4, 5))
def silu(x):
    return x * _sigmoid(x)


@silu.vjp
def silu_vjp(g, x):
    s = _sigmoid(x)
    return g * x * s * (1 - s)  # should be g * (s + x * s * (1 - s))
