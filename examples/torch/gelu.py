"""GELU, tanh approximation, as a torch.autograd.Function, checked in float32 through functions of tensors.

``gelu_tanh`` uses the right rule (passes). ``gelu_wrong_constant`` uses a backward that
differentiates 0.044715 x^3 as 0.044715 x^2, the 3 dropped (fails on x). Both are checked with
the decorator form, framework="torch" and dtype="float32": torch's gradient in float32 against
gradcli's float64 reference.
"""
import math

import torch

import gradcli

C = math.sqrt(2.0 / math.pi)


def _derivative(x, k):
    t = torch.tanh(C * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + k * x * x)


class GeluTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(C * (x + 0.044715 * x ** 3)))

    @staticmethod
    def backward(ctx, g):
        return g * _derivative(ctx.saved_tensors[0], 3 * 0.044715)


class GeluWrongConstant(GeluTanh):
    @staticmethod
    def backward(ctx, g):
        return g * _derivative(ctx.saved_tensors[0], 0.044715)


@gradcli.check(x=(4, 8), framework="torch", dtype="float32")
def gelu_tanh(x):
    return GeluTanh.apply(x)


@gradcli.check(x=(4, 8), framework="torch", dtype="float32")
def gelu_wrong_constant(x):
    return GeluWrongConstant.apply(x)
