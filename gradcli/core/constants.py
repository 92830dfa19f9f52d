"""Every named constant of the verdict layer, once: tolerances, safety factors, step rules.

Where two contexts need different values they carry two names, and the comment says why.
"""
from __future__ import annotations

import numpy as np

#: Default (rtol, atol) per ``grad`` method. AD and complex step are exact up to rounding; the differences
#: are as good as their step allows, and their own error estimate is added on top.
TOLERANCES = {
    "symbolic": (0.0, 0.0),
    "forward": (1e-10, 0.0),
    "reverse": (1e-10, 0.0),
    "complex_step": (1e-10, 0.0),
    "central": (1e-6, 0.0),
    "richardson": (1e-8, 0.0),
}
#: Default (rtol, atol) per ``hessian`` method: second-order AD is exact up to rounding (which ``spread``
#: covers); differences of the gradient are as good as their step, plus their own error estimate.
HESSIAN_TOLERANCES = {
    "symbolic": (0.0, 0.0),
    "forward_over_reverse": (1e-10, 0.0),
    "reverse_over_forward": (1e-10, 0.0),
    "central_of_reverse": (1e-6, 0.0),
}
#: The methods that estimate by stepping: they add the floor to their tolerance and may be unavailable.
NUMERICAL = ("central", "richardson", "complex_step")
HESSIAN_NUMERICAL = ("central_of_reverse",)

#: How many times its own error estimate, and the rounding spread, a method may be off (grad, hessian, batch).
ESTIMATE_SAFETY = 10.0
ROUNDING_SAFETY = 10.0
#: ``gradcli check``'s factor on its Ridders estimate: 3, not 10, because those estimates are already
#: pessimistic (the larger of the tableau's change and the gap to a second step, see gradcli.checks.comparisons.numeric).
CHECK_ESTIMATE_SAFETY = 3.0
#: Below this, float64 has no relative precision left (subnormal numbers): no method can do better.
SUBNORMAL = 16 * np.finfo(np.float64).tiny
#: An entry that one extra ulp of rounding per operation moves by more than this fraction cannot be
#: computed in float64 at all (tan of 59**59, whose argument is only known to 1e88).
ILL_CONDITIONED = 1e-3
#: ... unless rounding moves it no more than this many times one ulp of the point's inputs and constants
#: does: then the derivative is as well determined as the point itself (a gradient of 0 at a minimum).
PROGRAM_LOSS = 1e3
#: Digits of float64 (about 15.95): what "the program loses N of its digits" counts against.
FLOAT64_DIGITS = 16
#: A derivative that the program as written computes with at least this many digits fewer than float64
#: holds gets a note saying so, even where the comparison still has enough of them.
NOTE_LOST_DIGITS = 4
#: The numerical methods see f to about this share of its size: a derivative below it is only known that well.
FLOOR_SHARE = 1e-8
#: A numerical estimate whose own error is above this share of the derivative has no digits to compare.
VAGUE_SHARE = 0.5

#: Ridders' tableau: step ratio, number of rows, and how much worse the last diagonal may get before
#: the extrapolation stops (Numerical Recipes' CON, NTAB, SAFE).
RIDDERS_CON = 2.0
RIDDERS_ROWS = 14
#: ``gradcli check`` refines from 4H down to 4H / 2**15: its H (2**-10) is fixed, not found by a search.
CHECK_RIDDERS_ROWS = 16
RIDDERS_SAFE = 2.0
RIDDERS_H0 = 2.0 ** -4
#: An error estimate counts only once it is this small relative to the estimate itself: before
#: that, agreement between rows may be luck (steps straddling a pole or many periods).
RIDDERS_CREDIBLE = 1e-4
#: How many times central differences' own estimate Richardson's result may differ from theirs.
ESTIMATE_GAP = 10.0
#: Complex step size, relative to |x|: any small h works (no subtraction), this one keeps h**2 far
#: below the float64 resolution of f while h itself stays a normal number.
COMPLEX_H = 1e-20
#: Complex step sizes relative to |x| per real dtype: h**2 must vanish against eps, h*f' must not underflow.
COMPLEX_STEP = {np.dtype(np.float64): (COMPLEX_H, 1e-300), np.dtype(np.float32): (1e-10, 1e-30)}
#: Step scales central differences try at one point, from 1e-6*min(|x|, 1) to max(|x|, 1).
CENTRAL_CANDIDATES = 13
#: Variables x nodes up to which central differences check their stencils for kinks, jumps and poles.
STRADDLE_BUDGET = 20_000
