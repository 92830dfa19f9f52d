"""AD whose intermediate products leave float64's range, redone where float64 lost them.

Forward and reverse mode multiply local partials along each path: ``d/dx 1/(1+exp(-x))`` at x = -400 is
``(-1/y**2) * (-exp(400))`` with y = 5e173, a product of 3.7e-348 (below float64's smallest number) and
5e173 whose result, 1.9e-174, is an ordinary float64. In float64 the first factor is already 0, so both
modes say 0, and agree with each other; ``exp(800) * exp(-800)`` overflows to ``inf * 0 = nan`` the same
way. No ordering of the table's partials avoids this in general (the reverse adjoint of y *is* 3.7e-348).

So an entry that float64 may have lost (exactly 0, subnormal, or not finite) is recomputed by the same
method in an extended precision whose exponent reaches 1e4932 (x87's 80-bit ``numpy.longdouble`` on
x86 Linux), and replaced by that result rounded to float64 where it differs. An exact zero recomputes
to an exact zero, a real pole to inf or nan, so only what float64's range lost changes. On a platform
whose long double is float64 itself (``EXTENDED`` is None) nothing is redone: :func:`lost` then names
the entries that cannot be vouched for.
"""
from __future__ import annotations

import numpy as np

from gradcli.core.primitives import Ops

_F64 = np.finfo(np.float64)
#: a floating type with a wider exponent than float64, or None where the platform has none
EXTENDED = np.longdouble if np.finfo(np.longdouble).maxexp > _F64.maxexp else None


def suspect(xp, J):
    """Entries float64 may have lost to its range: 0, subnormal, inf or nan."""
    a = xp.abs(J)
    return (a < _F64.tiny) | ~xp.isfinite(J)


class Watch:
    """Sees the intermediates of a sweep (values, tangents, partials, adjoints; dual numbers and tape
    variables opened) and
    remembers where one was outside float64's normal range: subnormal, beyond its largest number, or
    infinite. In float64 that says digits or range may have been lost; in the extended type, that the
    range is what float64 lost (and not digits to a cancellation, which a wider type would also mend
    but which is the program's own ill-conditioning, reported as such). With ``n`` the record is per
    point (the last axis of the batch's arrays), else one flag."""

    def __init__(self, n: int | None = None):
        self.n = n
        self.where = np.zeros(n or 1, dtype=bool)

    @property
    def lost(self) -> bool:
        return bool(self.where.any())

    def see(self, *items) -> None:
        for a in items:
            if a is None or isinstance(a, (str, int)):
                continue
            if hasattr(a, "tangent"):  # a dual number, nested or not
                self.see(a.value, a.tangent)
                continue
            if hasattr(a, "requires_grad") and hasattr(a, "value"):  # a tape variable
                self.see(a.value)
                continue
            try:
                m = np.abs(np.asarray(a))
                out = ((m > 0) & (m < _F64.tiny)) | (m > _F64.max)
            except (TypeError, ValueError):
                continue
            if self.n is None or out.ndim == 0 or out.shape[-1] != self.n:
                self.where |= bool(out.any())
            else:
                self.where |= out.reshape(-1, self.n).any(axis=0)


class Watched(Ops):
    """``ops`` whose every call ``watch`` sees, arguments and result: wrapped around each level of a
    nested sweep (dual numbers over dual numbers or over a tape), it sees every value, partial and
    product of partials that level computes."""

    def __init__(self, ops: Ops, watch: Watch):
        self.ops = ops
        self.watch = watch

    def apply(self, name, *args):
        self.watch.see(*args)
        out = self.ops.apply(name, *args)
        self.watch.see(out)
        return out


def widened(inputs: dict) -> dict:
    """The point or the points in the extended type (numpy only)."""
    return {k: np.asarray(v, dtype=EXTENDED)[()] for k, v in inputs.items()}


def repaired(J, J_wide, where):
    """``J`` with the entries the extended result may replace (``where``) replaced by that result rounded
    to float64 where that is finite or float64's is not either (numpy)."""
    with np.errstate(all="ignore"):
        rounded = np.asarray(J_wide).astype(np.float64)
    return np.where(where & (np.isfinite(rounded) | ~np.isfinite(J)), rounded, J)


def at_point(jacobian, point: dict, J, watch: Watch):
    """``J = jacobian(point, watch)`` (an array; ``watch`` saw its sweep), recomputed by ``jacobian`` in the
    extended type where float64 may have lost range (an entry 0, subnormal or not finite, or an
    intermediate out of range), and taken from there where the wider sweep shows that range was lost."""
    J = np.asarray(J)
    candidates = suspect(np, J) | watch.lost
    if EXTENDED is None or not candidates.any():
        return J
    wide = Watch()
    with np.errstate(all="ignore"):
        try:
            J_wide = jacobian(widened(point), wide)
        except (TypeError, ValueError, OverflowError):  # a primitive numpy has no long double loop for
            return J
    return repaired(J, J_wide, candidates & wide.lost)
