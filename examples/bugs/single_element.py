"""BUG: wrong on a single element. A smoothness penalty sum((x[i+1] - x[i])**2) over a sequence, with
its gradient written as a loop that stops one element early: the last element's gradient stays 0.
Every other element is right, so only an element-by-element check finds it (input x, index [7]).
"""
import numpy as np

import gradcli


@gradcli.check(x=(8,))
def smoothness(x):
    return np.sum((x[1:] - x[:-1]) ** 2)


@smoothness.grad
def smoothness_grad(x):
    n = len(x)
    dx = np.zeros_like(x)
    for i in range(n - 1):  # should be range(n): the last element has a term too
        if i > 0:
            dx[i] += 2 * (x[i] - x[i - 1])
        if i < n - 1:
            dx[i] -= 2 * (x[i + 1] - x[i])
    return dx
