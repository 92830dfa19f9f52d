"""One step of a vanilla (Elman) RNN: h_next = tanh(x @ Wx + h @ Wh + b), and its backward step.

The vjp is what backpropagation through time calls once per step: from the gradient of the next
hidden state it returns the gradients of the input, the previous state and the three parameters.
"""
import numpy as np

import gradcli


@gradcli.check(x=(3, 4), h=(3, 5), Wx=(4, 5), Wh=(5, 5), b=(5,))
def rnn_step(x, h, Wx, Wh, b):
    return np.tanh(x @ Wx + h @ Wh + b)


@rnn_step.vjp
def rnn_step_vjp(g, x, h, Wx, Wh, b):
    h_next = np.tanh(x @ Wx + h @ Wh + b)
    da = g * (1 - h_next ** 2)
    return da @ Wx.T, da @ Wh.T, x.T @ da, h.T @ da, da.sum(axis=0)
