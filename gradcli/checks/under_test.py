"""Calling the code under test: the hand-written gradient, vjp and hvp, and reading what they return.

Each call returns the arrays, or a :class:`Verdict` when the code under test raised or returned the
wrong count or shape (a ``fail``: the gradient under test is what is wrong). Nothing is raised for that:
the caller returns the verdict as its outcome.
"""
from __future__ import annotations

import os
import traceback as tb

import numpy as np

from gradcli.checks.context import CheckContext, Verdict, array_dtype

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without gradcli's own frames."""
    frames = [f for f in tb.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(_PACKAGE + os.sep)]
    return ("Traceback (most recent call last):\n" + "".join(tb.format_list(frames))
            + "".join(tb.format_exception_only(type(exc), exc)))


class Finding(Exception):
    """Raised by a framework target's vjp to report what is wrong with the gradient under test in its
    own words (a backward that returned None): the message is the verdict's, with no traceback."""


def raised(status: str, what: str, exc: Exception) -> Verdict:
    if isinstance(exc, Finding):
        return Verdict(status, str(exc))
    return Verdict(status, f"{what} raised {type(exc).__name__}: {exc}", user_traceback(exc))


#: How a framework's own gradient under test is named: (in prose, in the methods table and JSON)
FRAMEWORK_GRADIENT = {"torch": ("torch's backward", "torch_backward"), "jax": ("JAX's vjp", "jax_vjp")}


def framework_under_test(ctx) -> str | None:
    """"torch" or "jax" where the gradient under test is the framework's own (no hand-written one), else None."""
    spec = ctx.spec
    framework = spec.options.get("framework") if spec is not None else None
    if framework in FRAMEWORK_GRADIENT and spec.vjp is None and spec.grad is None:
        return framework
    return None


def _vjp_name(ctx) -> str:
    framework = framework_under_test(ctx)
    return FRAMEWORK_GRADIENT[framework][0] if framework else "the vjp function"


def user_gradient(ctx: CheckContext, what: str, grads=None):
    """Gradients from ``grads`` (with_grad) or from calling the hand-written grad -> {name: array} | Verdict."""
    if grads is None:
        try:
            grads = ctx.spec.grad(**ctx.fresh_inputs())
        except Exception as exc:  # noqa: BLE001 - the gradient under test raised: that is a failure
            return raised("fail", "the gradient function", exc)
    return normalize(ctx, grads, what)


def gradient_as_vjp(grads, g):
    """A hand-written gradient (array, tuple or dict) as the vjp of a scalar output for the cotangent g."""
    scale = float(np.asarray(g).ravel()[0])
    if isinstance(grads, dict):
        return {k: v * scale for k, v in grads.items()}
    return tuple(v * scale for v in grads) if isinstance(grads, tuple) else grads * scale


def user_vjp_at(ctx: CheckContext, g: np.ndarray):
    """The vjp under test for the flat cotangent ``g`` -> {name: array} | Verdict."""
    g = np.array(g.reshape(ctx.out_shape), dtype=array_dtype(ctx.dtype))
    try:
        res = ctx.vjp(g, **ctx.fresh_inputs())
    except Exception as exc:  # noqa: BLE001
        return raised("fail", _vjp_name(ctx), exc)
    return normalize(ctx, res, "the vjp")


def user_hvp(ctx: CheckContext, v: dict):
    """The hvp under test for direction ``v`` ({name: array}) in the dtype under test -> flat | Verdict."""
    vs = tuple(np.array(v[k], dtype=array_dtype(ctx.dtype)) for k in ctx.wrt)
    try:
        res = ctx.spec.hvp(vs[0] if len(vs) == 1 else vs, **ctx.fresh_inputs())
    except Exception as exc:  # noqa: BLE001 - the hvp under test raised: a failure
        return raised("fail", "the hvp function", exc)
    out = normalize(ctx, res, "the hvp")
    return out if isinstance(out, Verdict) else ctx.flat(out)


def under_test_vjp(ctx: CheckContext, w: np.ndarray):
    """The gradient under test of <w, f> at the inputs, flat over the wrt inputs (w: flat, size m) | Verdict."""
    if ctx.autodiff:
        if ctx.scalar:
            return ctx.flat(ctx.ad.gradient()) * float(w[0])
        return ctx.flat(ctx.ad.vjp(w.reshape(ctx.out_shape)))
    if ctx.scalar and ctx.vjp is None:
        g = user_gradient(ctx, "the gradient function", ctx.user_grads)
        return g if isinstance(g, Verdict) else ctx.flat(g) * float(w[0])
    g = user_vjp_at(ctx, w)
    return g if isinstance(g, Verdict) else ctx.flat(g)


def normalize(ctx: CheckContext, res, what: str):
    """One array per wrt input, each of exactly that input's shape -> {name: array}, or a fail Verdict."""
    wrt = ctx.wrt
    names = ", ".join(wrt)
    if isinstance(res, dict):
        unknown = [k for k in res if k not in ctx.inputs]
        if unknown:
            return Verdict("fail", f"{what} returned a gradient for {_names(unknown)}, which "
                                   f"{'is not an input' if len(unknown) == 1 else 'are not inputs'}")
        missing = [k for k in wrt if k not in res]
        if missing:
            return Verdict("fail", f"{what} returned no gradient for {_names(missing)} (expected one for each of: "
                                   f"{names})")
        items = [res[k] for k in wrt]
    elif isinstance(res, (tuple, list)) and not (len(wrt) == 1 and _is_array_like_list(res, ctx.shapes[wrt[0]])):
        if len(res) != len(wrt):
            hint = " (use wrt=[...] to check only some inputs)" if len(res) < len(wrt) else ""
            return Verdict("fail", f"{what} returned {len(res)} gradient{'s' if len(res) != 1 else ''} for "
                                   f"{len(wrt)} input{'s' if len(wrt) != 1 else ''} ({names}){hint}")
        items = list(res)
    elif len(wrt) == 1:
        items = [res]
    else:
        return Verdict("fail", f"{what} returned a single {type(res).__name__} for {len(wrt)} inputs ({names}): "
                               "return one per input (a tuple in parameter order, or a dict by name)")
    out, wrong = {}, []
    for k, g in zip(wrt, items):
        if np.iscomplexobj(g) and np.any(np.imag(g) != 0):
            # float64 would drop the imaginary part (with a ComplexWarning) and pass what is wrong
            return Verdict("fail", f"{what}: the gradient for {k!r} has an imaginary part (largest "
                                   f"|imag| {float(np.max(np.abs(np.imag(g)))):.3g}), but {k} is real")
        try:
            a = np.asarray(np.real(g) if np.iscomplexobj(g) else g, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            return Verdict("fail", f"{what}: the gradient for {k!r} is not a numeric array ({exc})")
        if a.shape != ctx.shapes[k]:
            wrong.append(f"the gradient for {k!r} has shape {a.shape}, but {k} has shape {ctx.shapes[k]}")
        out[k] = a
    if wrong:  # every one of them: fixing the first must not reveal the next
        return Verdict("fail", f"{what}: " + "; ".join(wrong))
    return out


def _names(keys) -> str:
    return ", ".join(repr(k) for k in keys)


def _is_array_like_list(res, shape) -> bool:
    # a single input's gradient given as a plain list of numbers, rather than a list of one gradient
    if len(res) == 1 and np.shape(res[0]) == shape:
        return False
    return np.shape(res) == shape
