"""A sigmoid rule that is right in exact arithmetic and wrong in float32, beside its stable twin.

``sigmoid_stable`` differentiates as sigmoid(x) * sigmoid(-x) (passes). ``sigmoid_saturated``
differentiates as s * (1 - s) from the saved output s: for x between 9 and 12, s rounds to within
a few float32 ulp of 1 and 1 - s keeps only 2 to 3 correct digits (fails on x in float32; the same
rule passes in float64).
"""
import numpy as np
import torch

import gradcli

X = np.linspace(9.0, 12.0, 16)


class SigmoidFromOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return s

    @staticmethod
    def backward(ctx, g):
        _, s = ctx.saved_tensors
        return g * s * (1 - s)


class SigmoidStable(SigmoidFromOutput):
    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        return g * torch.sigmoid(x) * torch.sigmoid(-x)


@gradcli.check(x=X, framework="torch", dtype="float32")
def sigmoid_stable(x):
    return SigmoidStable.apply(x)


@gradcli.check(x=X, framework="torch", dtype="float32")
def sigmoid_saturated(x):
    return SigmoidFromOutput.apply(x)
