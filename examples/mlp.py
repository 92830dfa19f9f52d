"""A two-layer perceptron with ReLU and a mean squared error loss: the gradient of the loss with respect
to the parameters (W1, b1, W2, b2), with the data X and targets Y held constant through ``wrt``.
"""
import numpy as np

import gradcli


@gradcli.check(X=(8, 4), Y=(8, 2), W1=(4, 6), b1=(6,), W2=(6, 2), b2=(2,), wrt=("W1", "b1", "W2", "b2"))
def mlp_loss(X, Y, W1, b1, W2, b2):
    h = np.maximum(X @ W1 + b1, 0.0)
    out = h @ W2 + b2
    return 0.5 * np.mean(np.sum((out - Y) ** 2, axis=1))


@mlp_loss.grad
def mlp_loss_grad(X, Y, W1, b1, W2, b2):
    n = X.shape[0]
    z = X @ W1 + b1
    h = np.maximum(z, 0.0)
    dout = (h @ W2 + b2 - Y) / n
    dW2 = h.T @ dout
    db2 = dout.sum(axis=0)
    dz = (dout @ W2.T) * (z > 0)
    return X.T @ dz, dz.sum(axis=0), dW2, db2
