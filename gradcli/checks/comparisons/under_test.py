"""Calling the code under test: the hand-written gradient, vjp and hvp, and reading what they return.

Each call returns the arrays, or a :class:`Verdict` when the code under test raised or returned the
wrong count or shape (a ``fail``: the gradient under test is what is wrong). Nothing is raised for that:
the caller returns the verdict as its outcome.
"""
from __future__ import annotations

import os
import traceback as tb

import numpy as np

from gradcli.checks.context import (
    COTANGENT_SCALE, MAX_MISMATCHES, CheckContext, Outcome, Verdict, array_dtype, at_text, call_selected, mismatch)
from gradcli.checks.process.interrupt import raised_by_user_code

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
    return Verdict(status, f"{what} raised {raised_by_user_code(exc)}", user_traceback(exc))


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
    """The vjp under test for the flat cotangent ``g`` -> {name: array} | Verdict. It is given
    COTANGENT_SCALE * g, never g = 1 alone, and its result is divided back."""
    g = np.array(COTANGENT_SCALE * g.reshape(ctx.out_shape), dtype=array_dtype(ctx.dtype))
    try:
        res = ctx.vjp(g, **ctx.fresh_inputs())
    except Exception as exc:  # noqa: BLE001
        return raised("fail", _vjp_name(ctx), exc)
    out = normalize(ctx, res, "the vjp")
    # + 0.0: a 0 the vjp returned stays 0, not -0
    return out if isinstance(out, Verdict) else {k: v / COTANGENT_SCALE + 0.0 for k, v in out.items()}


def zero_cotangent(ctx: CheckContext):
    """A failing Outcome where the vjp under test, given the cotangent 0, returns a gradient that is not 0
    (as gradcheck's "backward not multiplied by grad_output"): a vjp is linear in its cotangent. Random
    cotangents catch most such rules; this names the cause. None where there is nothing to say (no vjp,
    or one that raises, which the comparison reports)."""
    if ctx.vjp is None or ctx.autodiff:
        return None
    got = user_vjp_at(ctx, np.zeros(ctx.m))
    if isinstance(got, Verdict):
        return None
    flat = ctx.flat(got)
    # 0 * inf is NaN: a gradient that is not finite is the comparison's to report
    wrong = np.flatnonzero(np.isfinite(flat) & (flat != 0))
    if not wrong.size:
        return None
    worst = wrong[np.argsort(-np.abs(flat[wrong]), kind="stable")][:MAX_MISMATCHES]
    found = tuple(mismatch(ctx, int(c), 0.0, flat[c]) for c in worst)
    first = found[0]
    names = sorted({m.input for m in found}, key=ctx.wrt.index)
    return Outcome(verdict=Verdict("fail", (
        f"{_vjp_name(ctx)} is not multiplied by its cotangent: given the cotangent 0 it returns a gradient that "
        f"is not 0 for {', '.join(names)} ({wrong.size} of {ctx.n} entries, largest {first.got:.6g} at "
        f"{at_text(first.input, first.index)}); a vjp is linear in its cotangent, so 0 gives 0 (gradcheck: "
        "backward not multiplied by grad_output)")), mismatches=found, stop=True)


class SteadyOutput:
    """f as the numerics call it, watching that the output keeps the shape and floating-point dtype it has
    at the point: an output that changes either when the inputs move (float32 above a threshold, a shape
    that depends on the values) has no derivative to check, as gradcheck's "outputs with the same
    dtype/shape" says. A call that changes it raises (the numerics take it as a step they cannot use) and
    the first such change is kept in ``change`` for the verdict."""

    def __init__(self, fn, with_grad: bool, output, base: dict, at_point):
        self.fn, self.with_grad, self.output, self.base = fn, with_grad, output, base
        at_point = np.asarray(at_point)
        self.shape, self.dtype = at_point.shape, at_point.dtype
        self.change: str | None = None
        many = getattr(fn, "batch", None)
        if many is not None and not with_grad:  # the numerics' batched calls (gradcli.checks.comparisons.numeric)
            self.batch = lambda points: self._batch(many, points)

    def _batch(self, many, points: list):
        """The selected output at many points from one batched evaluation (points on the leading axis), or
        None where it does not keep the point's shape and dtype (the points are then called one by one)."""
        out = many(points)
        if isinstance(out, (tuple, list)):
            out = out[0 if self.output is None else self.output]
        out = np.asarray(out)
        return out if out.shape == (len(points),) + self.shape and out.dtype == self.dtype else None

    def __call__(self, inputs: dict, complex_ok: bool = False):
        out = call_selected(self.fn, inputs, self.with_grad, self.output)
        if complex_ok:  # complex step's own call: its dtype is complex by design
            return out
        a = np.asarray(out)
        floats = a.dtype.kind == "f" and self.dtype.kind == "f"
        if a.shape != self.shape or (floats and a.dtype != self.dtype):
            what = (f"{self.shape} at the inputs, {a.shape}" if a.shape != self.shape
                    else f"{self.dtype} at the inputs, {a.dtype}")
            moved = {k: float(np.max(np.abs(np.asarray(v, dtype=np.float64) - self.base[k]), initial=0.0))
                     for k, v in inputs.items() if k in self.base and np.asarray(v).dtype.kind == "f"
                     and np.shape(v) == np.shape(self.base[k])}
            step = ", ".join(f"{k} moved by up to {d:.3g}" for k, d in moved.items() if d > 0)
            if self.change is None:
                self.change = (f"the output changes {'shape' if a.shape != self.shape else 'dtype'} when the inputs "
                               f"move: {what} with {step or 'the inputs moved'}; a function whose output "
                               "shape or dtype depends on the input's value has no consistent derivative to "
                               "check (gradcheck: outputs with the same dtype/shape when inputs are perturbed)")
            raise TypeError(self.change)
        return out


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
                               "return one per input (a tuple in wrt order, or a dict by name)")
    out, wrong = {}, []
    for k, g in zip(wrt, items):
        try:  # a ragged list raises in iscomplexobj as in asarray
            if np.iscomplexobj(g) and np.any(np.imag(g) != 0):
                # float64 would drop the imaginary part (with a ComplexWarning) and pass what is wrong
                return Verdict("fail", f"{what}: the gradient for {k!r} has an imaginary part (largest "
                                       f"|imag| {float(np.max(np.abs(np.imag(g)))):.3g}), but {k} is real")
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
    # a single input's gradient given as a plain list of numbers, rather than a list of one gradient;
    # a ragged list is taken as one (malformed) array, so that the message says it is not numeric
    try:
        if len(res) == 1 and np.shape(res[0]) == shape:
            return False
        return np.shape(res) == shape
    except ValueError:
        return True
