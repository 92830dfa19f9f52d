"""Fused softmax cross-entropy as a torch.autograd.Function: the batch mean of -log softmax(z)[label].

``SoftmaxXent`` is right (passes): its backward is (softmax(z) - onehot(labels)) / batch.
``SoftmaxXentNoBatchDivide`` is the bug (fails on z): its backward forgets the division by the
batch size that the forward's mean implies, so the gradient is 4 times too large here. The
integer labels are a constant of the check.
"""
import numpy as np
import torch

import gradcli

LABELS = np.array([1, 0, 4, 2])


class SoftmaxXent(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, labels):
        ctx.save_for_backward(z, labels)
        return -torch.log_softmax(z, 1).gather(1, labels[:, None]).mean()

    @staticmethod
    def backward(ctx, g):
        z, labels = ctx.saved_tensors
        onehot = torch.nn.functional.one_hot(labels, z.shape[1]).to(z.dtype)
        return g * (torch.softmax(z, 1) - onehot) / z.shape[0], None


class SoftmaxXentNoBatchDivide(SoftmaxXent):
    @staticmethod
    def backward(ctx, g):
        z, labels = ctx.saved_tensors
        onehot = torch.nn.functional.one_hot(labels, z.shape[1]).to(z.dtype)
        return g * (torch.softmax(z, 1) - onehot), None


gradcli.check(SoftmaxXent.apply, z=(4, 5), labels=LABELS)
gradcli.check(SoftmaxXentNoBatchDivide.apply, z=(4, 5), labels=LABELS)
