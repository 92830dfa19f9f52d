"""Single-head attention weights as an nn.Module: softmax(q k^T / sqrt(d)) with q and k from nn.Linear
projections of x, and the scores q k^T / sqrt(d) a torch.autograd.Function.

``AttentionScores`` (the right rule, ``Scores``) passes, on x and on every parameter: q.weight,
q.bias and k.weight, in the module's own dtype, float32. ``AttentionScoresMissingScale`` is the
bug: its rule's gradient for q forgets the forward's 1 / sqrt(d), so the gradients of x, q.weight
and q.bias fail; k.weight's is right.
"""
import math

import torch

import gradcli


class Scores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k):
        ctx.save_for_backward(q, k)
        return q @ k.T / math.sqrt(q.shape[1])

    @staticmethod
    def backward(ctx, g):
        q, k = ctx.saved_tensors
        c = math.sqrt(q.shape[1])
        return g @ k / c, g.T @ q / c


class ScoresMissingScale(Scores):
    @staticmethod
    def backward(ctx, g):
        q, k = ctx.saved_tensors
        return g @ k, g.T @ q / math.sqrt(q.shape[1])


class AttentionScores(torch.nn.Module):
    rule = Scores

    def __init__(self, d=4, h=3):
        super().__init__()
        torch.manual_seed(0)
        self.q = torch.nn.Linear(d, h)
        self.k = torch.nn.Linear(d, h, bias=False)  # a key bias adds a constant per row: softmax drops it

    def forward(self, x):
        return torch.softmax(self.rule.apply(self.q(x), self.k(x)), -1)


class AttentionScoresMissingScale(AttentionScores):
    rule = ScoresMissingScale


gradcli.check(AttentionScores(), x=(3, 4))
gradcli.check(AttentionScoresMissingScale(), x=(3, 4))
