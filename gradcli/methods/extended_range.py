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
_SCALARS = {float, np.float64, np.longdouble}
_FEW = 16
_MAX, _TINY = float(_F64.max), float(_F64.tiny)


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
            if a is None or isinstance(a, (str, int)) or (self.n is None and self.where[0]):
                continue  # one flag, already raised: nothing more to learn from this sweep
            if hasattr(a, "tangent"):  # a dual number, nested or not
                self.see(a.value, a.tangent)
                continue
            if hasattr(a, "requires_grad") and hasattr(a, "value"):  # a tape variable
                self.see(a.value)
                continue
            if type(a) in _SCALARS:  # the point's sweeps see one number at a time: no array for it
                if _outside(a):
                    self.where[:] = True
                continue
            if self.n is None and type(a) is np.ndarray and a.dtype == np.float64 and a.size <= _FEW:
                # a point's tangents hold one entry per variable: a few floats are read faster in Python
                # than through numpy's reductions (float64 only: a wider value would round on the way)
                if any(_outside(v) for v in a.ravel().tolist()):
                    self.where[:] = True
                continue
            try:
                m = np.abs(np.asarray(a))
                if self.n is None or m.ndim == 0 or m.shape[-1] != self.n:
                    self.where |= _out_of_range(m)
                    continue
                out = ((m > 0) & (m < _F64.tiny)) | (m > _F64.max)
            except (TypeError, ValueError):
                continue
            self.where |= out.reshape(-1, self.n).any(axis=0)


def _outside(v) -> bool:
    """Whether the one number ``v`` is subnormal or beyond float64's largest number."""
    m = abs(v)
    return m > _MAX or 0 < m < _TINY


def _out_of_range(m) -> bool:
    """Whether any of the magnitudes ``m`` is subnormal or beyond float64's largest number (in few
    passes: the Hessian's sweeps see arrays of rows x variables at every step)."""
    if m.size == 0:
        return False
    if m.max() > _F64.max:
        return True
    return np.count_nonzero(m < _F64.tiny) != np.count_nonzero(m == 0)  # a subnormal among the zeros


class Watched(Ops):
    """``ops`` whose every result ``watch`` sees: wrapped around each level of a nested sweep (dual
    numbers over dual numbers or over a tape), it sees every value, partial and product of partials
    that level computes (the arguments are results of the level below, or the point's own).
    ``values_seen``: the level below is watched too, so a dual number's value was seen there; only its
    tangent is new (the nested sweeps of the Hessian would otherwise see every value twice)."""

    def __init__(self, ops: Ops, watch: Watch, values_seen: bool = False):
        self.ops = ops
        self.watch = watch
        self.values_seen = values_seen

    def apply(self, name, *args):
        out = self.ops.apply(name, *args)
        self.watch.see(out.tangent if self.values_seen and hasattr(out, "tangent") else out)
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


def at_point(jacobian, point: dict, J, watch: Watch, entries: bool = True):
    """``J = jacobian(point, watch)`` (an array; ``watch`` saw its sweep), recomputed by ``jacobian`` in the
    extended type where float64 may have lost range (an entry 0, subnormal or not finite, or an
    intermediate out of range), and taken from there where the wider sweep shows that range was lost.
    ``entries`` False: only where an intermediate was seen out of range (for an estimate run many times
    over, where an entry 0, a Hessian's structural zero, must not cost a wider sweep each time)."""
    J = np.asarray(J)
    candidates = (suspect(np, J) if entries else np.zeros(J.shape, dtype=bool)) | watch.lost
    if EXTENDED is None or not candidates.any():
        return J
    wide = Watch()
    with np.errstate(all="ignore"):
        try:
            J_wide = jacobian(widened(point), wide)
        except (TypeError, ValueError, OverflowError):  # a primitive numpy has no long double loop for
            return J
    return repaired(J, J_wide, candidates & wide.lost)
