"""Finite differences of a torch Function's forward evaluated in batches (torch.func.vmap over the stencil
points): the check gives what calling the forward once per point gives (the reference here: the same
check with batches turned off; to rounding, since a batch's vectorised kernels may round the last bit
otherwise), in far fewer calls; a forward vmap cannot run, or one that computes something else under
vmap, is called point by point."""
import dataclasses
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gradcli.checks.comparisons import numeric  # noqa: E402
from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402

SHAPE = (1, 2, 4, 3)
ELEMENTS = 3 * 24
CALLS = {"forward": 0}


class Attention(torch.autograd.Function):
    """Causal attention softmax(q k^T / sqrt(d) + mask) v with its rule."""

    @staticmethod
    def forward(ctx, q, k, v, dq_scale=1.0):
        CALLS["forward"] += 1
        n, d = q.shape[-2:]
        hidden = torch.ones(n, n, dtype=torch.bool).triu(1)
        p = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(hidden, float("-inf")), -1)
        ctx.save_for_backward(q, k, v, p)
        ctx.dq_scale = dq_scale
        return p @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        c = 1 / math.sqrt(q.shape[-1])
        dp = g @ v.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        return ds @ k * c * ctx.dq_scale, ds.transpose(-1, -2) @ q * c, p.transpose(-1, -2) @ g, None


class AttentionDqNoScale(Attention):
    @staticmethod
    def forward(ctx, q, k, v):
        return Attention.forward(ctx, q, k, v, dq_scale=math.sqrt(q.shape[-1]))


class Branches(torch.autograd.Function):
    """A forward that branches on a value: vmap refuses it."""

    @staticmethod
    def forward(ctx, x):
        CALLS["forward"] += 1
        ctx.save_for_backward(x)
        return x ** 3 if x.detach().sum().item() > -1e9 else x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class ReadsRequiresGrad(torch.autograd.Function):
    """A forward whose value depends on whether its input requires grad (it does under apply, not under
    vmap): a batch that computes something else, which the check must not use."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x) if x.requires_grad else torch.cos(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


def check(fn, batch: bool, **inputs):
    """-> (the check's result with its seconds zeroed, the forward's calls)."""
    saved = numeric.Function.__init__

    def without_batch(self, *a, **k):
        saved(self, *a, **k)
        self.batch = None
    CALLS["forward"] = 0
    try:
        if not batch:
            numeric.Function.__init__ = without_batch
        r = run_check(build_spec(fn, **inputs), {})
    finally:
        numeric.Function.__init__ = saved
    return dataclasses.replace(r, seconds=0.0), CALLS["forward"]


def assert_same_check(got, want):
    """The same verdict, mismatches, reference and methods; the error figures to rounding."""
    assert (got.status, got.reference, got.mode) == (want.status, want.reference, want.mode)
    assert [(m.input, m.index) for m in got.mismatches] == [(m.input, m.index) for m in want.mismatches]
    assert {k: m.status for k, m in got.methods.items()} == {k: m.status for k, m in want.methods.items()}
    for k, m in want.methods.items():
        for f in ("max_abs_error", "max_rel_error"):
            a, b = getattr(got.methods[k], f), getattr(m, f)
            assert (a is None) == (b is None) and (b is None or a == pytest.approx(b, rel=1e-6, abs=1e-300))
    assert got.max_rel_error == pytest.approx(want.max_rel_error, rel=1e-6, abs=1e-300)


@pytest.mark.parametrize("cls, status", [(Attention, "pass"), (AttentionDqNoScale, "fail")])
def test_batched_differences_give_the_single_calls_result(cls, status):
    (got, batched_calls), (single, single_calls) = (check(cls.apply, b, q=SHAPE, k=SHAPE, v=SHAPE)
                                                     for b in (True, False))
    assert got.status == status
    assert_same_check(got, single)  # the differences' error estimates included
    # 6 points per element one by one, against a few vmapped calls
    assert single_calls > 6 * ELEMENTS and batched_calls < single_calls / 4
    if status == "fail":
        assert {m.input for m in got.mismatches} == {"q"}


def test_a_forward_vmap_refuses_is_called_point_by_point():
    (got, calls), (single, single_calls) = (check(Branches.apply, b, x=(3, 4)) for b in (True, False))
    assert got.status == "pass"
    assert_same_check(got, single)
    assert calls >= 12 * 6  # every stencil point was a call of its own


def test_a_batch_that_computes_something_else_is_not_used():
    x = np.random.default_rng(0).uniform(-1, 1, (3, 4))
    (got, _), (single, _) = (check(ReadsRequiresGrad.apply, b, x=x) for b in (True, False))
    assert_same_check(got, single)
    # cos under vmap would make the differences -sin(x): the forward under apply is sin, its rule cos
    assert got.status == "pass"
