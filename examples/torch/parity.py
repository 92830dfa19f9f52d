"""What gradgradcheck and gradcheck(check_forward_ad=True) check, as gradcli checks: second order, forward
mode and a backward that runs the same twice.

``Cube`` (y_i = sum_j x_ij^3 w_j) has a differentiable backward and passes ``order=2``.
``CubeDetachedGradOut`` detaches the incoming gradient: right at first order, wrong along the cotangent
at order 2 (fails). ``CubeOnce`` marks its backward ``@once_differentiable``: order 2 is skipped with that
reason, first order passes. ``SinMul`` defines a correct ``jvp`` (forward mode passes); ``SinMulJvpDropsW``
forgets the tangent of w in its ``jvp`` (fails in forward mode; its backward is right). ``ScaleKept`` keeps
2x on ctx and doubles it in place in backward, so a second backward gives another answer (fails: not
deterministic).
"""
import torch

import gradcli


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x ** 3 * w).sum(-1)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class CubeDetachedGradOut(Cube):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.detach()  # the bug: the double backward cannot see the cotangent
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class CubeOnce(Cube):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class SinMul(torch.autograd.Function):
    """y = sin(x) * w, with its forward rule dy = cos(x) w dx + sin(x) dw."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.save_for_forward(x, w)
        return torch.sin(x) * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * torch.cos(x) * w, g * torch.sin(x)

    @staticmethod
    def jvp(ctx, dx, dw):
        x, w = ctx.saved_tensors
        return torch.cos(x) * w * dx + torch.sin(x) * dw


class SinMulJvpDropsW(SinMul):
    @staticmethod
    def jvp(ctx, dx, dw):
        x, w = ctx.saved_tensors
        return torch.cos(x) * w * dx  # the bug: the tangent of w is forgotten


class ScaleKept(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.twice = 2 * x
        return x * x

    @staticmethod
    def backward(ctx, g):
        ctx.twice.mul_(2)  # the bug: state changed in place, so the next backward differs
        return g * ctx.twice / 2


for target in (Cube, CubeDetachedGradOut, CubeOnce):
    gradcli.check(target.apply, x=(3, 4), w=(4,), order=2)
for target in (SinMul, SinMulJvpDropsW):
    gradcli.check(target.apply, x=(3, 4), w=(3, 4))
gradcli.check(ScaleKept.apply, x=(5,))
