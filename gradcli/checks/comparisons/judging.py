"""The one judgement of a check's entries: the tolerance rule (gradcli.verdict.tolerance) with a check's
terms, the typical size an entry is relative to, and the absolute scale of an exact zero.

Every comparison (full and fast mode, second order, forward mode, a framework's rule at a kink) judges
its entries here; nothing here calls user code but through the numerics of the exact zero's scale.
"""
from __future__ import annotations

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.verdict import tolerance as vt
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.context import EPS, FLOOR_ULPS, CheckContext

#: An input's typical gradient magnitude is at least this share of the whole gradient's.
GLOBAL_SHARE = 1e-3


def judge(ctx: CheckContext, got, ref, err, typical, zero=None):
    """Per entry: (|got - ref|, tolerance, failed, undecided, live). See the runner's docstring.

    ``ctx`` contributes only the tolerances (``rtol``, ``atol``) and the dtype under test (the floor).
    ``zero()``, where given, is the absolute scale of an exact zero per entry (:func:`zero_of_columns`,
    :func:`zero_of_directions`): asked for only when an entry would fail or stay undecided without it."""
    floor = ctx.floor(ref)
    with np.errstate(all="ignore"):
        diff = np.abs(got - ref)
    live = np.isfinite(ref)
    for scale in (None, zero):
        with np.errstate(all="ignore"):  # an infinite error (next to a nan in the inputs) is a finding
            if scale is not None:  # the tolerance of an entry that is 0 gets the absolute scale of a zero
                floor = floor + vt.at_exact_zero(np, ref, np.nan_to_num(err), scale(), CHECK_ESTIMATE_SAFETY)
            # the one tolerance rule (gradcli.verdict.tolerance) with check's terms: the input's typical
            # gradient as the scale, no rounding spread and no subnormal term (the user's code is not ours to
            # jiggle), the floor of the dtype under test; the estimate is added here, with check's own safety
            # factor, because a NaN estimate must fail the entry rather than widen its tolerance to inf
            base = vt.tolerance(np, ref, typical, 0.0, None, floor, (ctx.rtol, ctx.atol), numerical=True,
                                tiny=0.0)
            tol = base + CHECK_ESTIMATE_SAFETY * err
        failed = live & ~(diff <= tol)
        undecided = live & ~failed & (CHECK_ESTIMATE_SAFETY * err > base)
        if not (failed.any() or undecided.any()):
            break
    return diff, tol, failed, undecided, live


def exact_zero(ctx: CheckContext) -> np.ndarray:
    """Per output element, the absolute scale of an exactly zero derivative along a random direction
    (gradcli.verdict.tolerance.exact_zero_scale), measured once per check (7 calls of f)."""
    if "zero" not in ctx.memo:
        u = num.random_directions(ctx.numf, 1, np.random.default_rng([ctx.seed, 37]))[0]
        size, curvature = num.size_and_curvature(ctx.numf, ctx.f0, u, ctx.step)
        ctx.memo["zero"] = vt.exact_zero_scale(size, curvature, ctx.step, FLOOR_ULPS * EPS[ctx.dtype])
    return ctx.memo["zero"]


def zero_of_columns(ctx: CheckContext, cols, rows=None):
    """``zero`` for :func:`judge` on Jacobian entries (output or cotangent row, input element ``cols``):
    per unit of each element, whose steps are its scale; ``rows`` (r, m): cotangents weighing the outputs."""
    def scale():
        z = exact_zero(ctx)
        per_row = z if rows is None else np.abs(np.asarray(rows)) @ z
        return per_row[:, None] / ctx.flat(ctx.numf.scales)[np.asarray(cols)][None]
    return scale


def zero_of_directions(ctx: CheckContext, shape, weights=None):
    """``zero`` for :func:`judge` on derivatives along random directions (J u: ``shape`` (k, m)), or on
    <J u, v> for cotangents ``weights`` (k, m) (``shape`` (1, k))."""
    def scale():
        z = exact_zero(ctx)
        if weights is not None:
            return (np.abs(np.asarray(weights)) @ z).reshape(shape)
        return np.broadcast_to(z, shape)
    return scale


def typical_by_input(ctx: CheckContext, ref, cols=None) -> np.ndarray:
    """Per entry, the median |ref| over the non-negligible entries of the same input (all rows)."""
    cols = np.arange(ctx.n) if cols is None else np.asarray(cols)
    which = ctx.input_of(cols)
    floor = ctx.floor(ref)
    out = np.zeros(ref.shape)
    mag = np.abs(ref)
    every = mag[np.isfinite(mag) & (mag > floor)]
    # an input whose whole gradient is (nearly) zero is measured against the gradient as a whole
    overall = GLOBAL_SHARE * float(np.median(every)) if every.size else 0.0
    for k in np.unique(which):
        sel = which == k
        block = mag[:, sel]
        block = block[np.isfinite(block) & (block > floor)]
        out[:, sel] = max(float(np.median(block)) if block.size else 0.0, overall)
    return out
