"""BUG: a forgotten 1/N. The loss is the mean squared error of a linear regression, but its gradient
is that of the sum: every element of dw is N times too large (input w).
"""
import numpy as np

import gradcli


@gradcli.check(X=(10, 3), y=(10,), w=(3,), wrt=("w",))
def mse(X, y, w):
    return np.mean((X @ w - y) ** 2)


@mse.grad
def mse_grad(X, y, w):
    return 2 * X.T @ (X @ w - y)  # should be divided by len(y)
