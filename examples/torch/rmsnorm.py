"""RMSNorm as a torch.autograd.Function, y = x / sqrt(mean(x^2) + eps) * w over the last axis.

``RMSNorm`` is right (passes). ``RMSNormEpsMismatch`` is the bug (fails on x and w): its backward
recomputes the root mean square with eps=1e-3 where the forward used 1e-5, so both gradients are
off by about the difference over mean(x^2). ``RMSNormLayer`` is an nn.Module with the right rule
and a weight parameter, checked on x and on ``weight`` in its own dtype, float32 (passes).
"""
import torch

import gradcli

EPS = 1e-5


def _rms(x, eps):
    return torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def _grads(g, x, w, r):
    xh, gxh = x / r, g * w
    return (gxh - xh * (gxh * xh).mean(-1, keepdim=True)) / r, (g * xh).sum(0)


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        r = _rms(x, EPS)
        ctx.save_for_backward(x, w, r)
        return x / r * w

    @staticmethod
    def backward(ctx, g):
        x, w, r = ctx.saved_tensors
        return _grads(g, x, w, r)


class RMSNormEpsMismatch(RMSNorm):
    @staticmethod
    def backward(ctx, g):
        x, w, _ = ctx.saved_tensors
        return _grads(g, x, w, _rms(x, 1e-3))  # the forward's eps is 1e-5


class RMSNormLayer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return RMSNorm.apply(x, self.weight)


gradcli.check(RMSNorm.apply, x=(4, 8), w=(8,))
gradcli.check(RMSNormEpsMismatch.apply, x=(4, 8), w=(8,))
gradcli.check(RMSNormLayer(8), x=(4, 8))
