"""The one tolerance and judgement rule of grad, hessian, batch and check, over an array namespace ``xp``.

An entry passes when ``|got - ref| <= rtol * max(|ref|, scale) + atol + 10 * spread [+ 10 * estimate + floor]
[+ 10 * the reference's estimate]``:

* ``scale`` is the derivative's magnitude without cancellation, sum over paths of |products of local
  partials|. A derivative that cancels to nearly zero (d/dx of ``x - sin(x)`` near 0) can only be
  computed in float64 to about eps * scale, so that, not |ref|, is what rounding is relative to;
* ``spread`` is how far float64 rounding moves forward mode's result when every rounding is made
  one ulp worse at random: it covers what ``scale`` cannot, such as ill-conditioned steps and inexact
  constants (sin(pi) is 1.2e-16 in float64, 0 in the exact reference);
* ``estimate`` is a numerical method's own error estimate, so a method is never blamed for the error
  it announced, and ``floor`` the size below which the numerical methods cannot see f change;
* without sympy the reference may be numerical (Richardson, or the differences of the gradient), and
  then its own estimate enters every comparison with it: exact AD is not blamed for its error.

A point is a batch of one: the same arrays of any shape serve both. ``--rtol``/``--atol`` replace all of
it with numpy.isclose's convention.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.constants import (
    ESTIMATE_SAFETY, ILL_CONDITIONED, PROGRAM_LOSS, ROUNDING_SAFETY, SUBNORMAL, VAGUE_SHARE)


def tolerance(xp, ref, scale, spread, estimate, floor, defaults, rtol=None, atol=None, numerical=False,
              tiny=SUBNORMAL, ref_estimate=None):
    """Per entry, the allowed |got - ref|. ``defaults`` is the method's (rtol, atol); ``tiny`` the size
    below which the dtype has no relative precision left; ``ref_estimate`` a numerical reference's own
    error estimate, which every comparison with it inherits (with the user's tolerance too: a
    reference known to 1e-10 cannot show an error of 1e-12)."""
    r_def, a_def = defaults
    inherited = 0.0 if ref_estimate is None else ESTIMATE_SAFETY * xp.where(xp.isnan(ref_estimate), xp.inf,
                                                                            ref_estimate)
    if rtol is not None or atol is not None:  # the user's own tolerance, exactly as given
        return (r_def if rtol is None else rtol) * xp.abs(ref) + (0.0 if atol is None else atol) + inherited
    tol = inherited + r_def * xp.maximum(xp.abs(ref), scale) + max(a_def, tiny) + ROUNDING_SAFETY * xp.nan_to_num(spread)
    if estimate is not None:
        tol = tol + ESTIMATE_SAFETY * xp.where(xp.isnan(estimate), xp.inf, estimate)
    if numerical:
        tol = tol + floor  # steps see f to about 1e-8 of its size: a derivative near 0 is only known that well
    return tol


def exact_zero_scale(size, curvature, step, ulp):
    """The absolute scale of a derivative that is exactly 0 (a stationary point), per unit of a step along a
    direction, for a function known only by its values (``gradcli check``): the larger of

    * what float64's rounding of f (``size``: |f| near the point) lets differences at ``step`` see,
      :data:`ROUNDING_SAFETY` times 8 eps |f| / step: a differences' estimate at that floor is float64's
      resolution, not vagueness (d/dx of cos(x) at 0 is known to 5e-12 there, and that decides it);
    * ``ulp`` (the dtype's, times the safety) of the gradient's own terms, which at a stationary point are
      the curvature along the direction (``curvature``, |phi''|) times the step scale: a correct rule
      rounds them (the SVD cofactor of a rank-1 matrix gives 1e-15 |A|^2 where the derivative is 0)."""
    return ROUNDING_SAFETY * 8 * np.finfo(np.float64).eps * size / step + ulp * curvature


def at_exact_zero(xp, ref, estimate, zero, safety):
    """Per entry, ``zero`` where the reference is 0 to its own estimate (times ``safety``) and to ``zero``
    itself, else 0: the absolute term the tolerance of an exact zero gets. Elsewhere the derivative's
    own size sets the scale, and the term would only loosen it."""
    return xp.where(xp.abs(ref) <= safety * estimate + zero, zero, 0.0)


def floor(share, sizes, xs):
    """The numerical methods' floor per entry: ``share`` of f's size (``sizes``, per output, or per output
    and point) for a unit step, per unit of each variable's scale ``xs`` (max(|x|, 1))."""
    return share * (1 + abs(sizes))[:, None] / xs[None]


@dataclass
class Judgement:
    """Per-entry masks of one method's result: ``exceeds`` (the error is beyond the tolerance) and, for
    a numerical method, why it has nothing to say: ``nonfinite`` (no finite estimate), ``vague`` (its
    own estimate is as large as the derivative), ``unseen`` (within the tolerance only because the floor
    or its estimate is that wide, while missing a nonzero derivative by half or more)."""

    tol: object
    exceeds: object
    nonfinite: object = None
    vague: object = None
    unseen: object = None
    unvouched: object = None


def judge_entries(xp, J, abs_err, ref, live, tol, estimate, floor_, numerical: bool, default_tol: bool,
                  vouch=None) -> Judgement:
    """The judgement of every ``live`` entry of ``J`` against ``ref`` with tolerance ``tol``. ``vouch``
    (the tolerance without the method's own estimate) is what a numerical method's estimate must fit
    within for its number to count: a result within tolerance only because its estimate is wide has
    not shown its digits (``unvouched``)."""
    exceeds = live & ~(abs_err <= tol)
    if not numerical:
        return Judgement(tol, exceeds)
    nonfinite = live & ~xp.isfinite(J)
    vague = xp.zeros_like(live)
    if estimate is not None:
        size = xp.maximum(xp.abs(J), xp.abs(ref))
        vague = live & (estimate > VAGUE_SHARE * size) & (estimate > floor_)
    unseen = xp.zeros_like(live)
    if default_tol:  # (d/dy of exp(x) + y at x = 40: y's steps change f by far less than f's rounding)
        err = xp.nan_to_num(abs_err, nan=xp.inf)
        unseen = live & (err <= tol) & (err > VAGUE_SHARE * xp.abs(ref)) & (ref != 0)
    unvouched = xp.zeros_like(live)
    if estimate is not None and vouch is not None:
        unvouched = live & ~vague & xp.isfinite(J) & ~(estimate <= vouch)
    return Judgement(tol, exceeds, nonfinite, vague, unseen, unvouched)


def ill_conditioned(xp, ref, scale, spread, input_spread=None, actual=None):
    """Entries that float64 cannot resolve: one more ulp of rounding per operation moves them by more than
    :data:`ILL_CONDITIONED` of their size (cancellation within 6 digits of ``scale`` is ordinary).

    ``actual``, where the reference is exact, is how far AD of the program really is from it: then an
    entry is ill-conditioned only where AD did lose the digits (relative to the derivative itself, not
    to the scale of its terms: reverse over forward of exp(t*w)*(t/t) gives 2 for 1.00000001, inside
    1e-6 of its terms' 4e16), and not where rounding merely could have (x - sin(x) at 0 is exact); an
    exact 0 is never ill-conditioned (d2/dy2 of (y/x)/y is 0, computed as 1e-16 from terms near 1).

    ``input_spread`` (how far one ulp of the inputs and constants moves them, and where it does so
    smoothly: :func:`gradcli.methods.forward.input_spread`) exempts a zero or tiny derivative (a
    stationary point) that rounding moves no more than :data:`PROGRAM_LOSS` times what the point's own
    ulp does: it is resolved to the point's precision, and judged absolutely. Where one ulp already
    moves it by chance (tan of 59**59), nothing is resolved."""
    size = xp.maximum(xp.abs(ref), 1e-6 * scale) if actual is None else xp.abs(ref)
    spread = xp.nan_to_num(spread)
    ill = xp.isfinite(ref) & (spread > ILL_CONDITIONED * size)
    if actual is not None:
        # an exact 0 has no digits to lose: it is judged absolutely, by how near 0 the methods come
        ill = ill & (xp.nan_to_num(actual, nan=xp.inf) > ILL_CONDITIONED * size) & (ref != 0)
    if input_spread is not None:
        one, smooth = input_spread
        ill = ill & ~(smooth & (spread <= PROGRAM_LOSS * xp.nan_to_num(one)))
    return ill


def rounding_tiny(dtype) -> float:
    """:data:`SUBNORMAL` for ``dtype``."""
    return 16 * float(np.finfo(dtype).tiny)


def batch_floor_share(dtype) -> float:
    """The batch's floor share: sqrt(eps) of the batch dtype, so that it keeps the same share of float32's
    digits. In float64 that is 1.5e-8 where one point uses :data:`FLOOR_SHARE` (1e-8): the two modes have
    always differed there, and merging them would move verdicts at the edge of the floor."""
    return float(np.sqrt(np.finfo(dtype).eps))
