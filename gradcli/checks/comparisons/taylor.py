"""The Taylor-remainder test: a verdict on a gradient (and on a Hessian-vector product) with no step to tune.

For one seeded random direction v (standard normal times each element's scale, as the finite
differences use) and the steps h = 2^-1, 2^-2, ..., 2^-STEPS:

    r1(h) = |phi(x + h v) - phi(x) - h <g, v>|                       = O(h^2) when g is the gradient
    r2(h) = |phi(x + h v) - phi(x) - h <g, v> - h^2/2 <v, Hv>|        = O(h^3) when Hv is right too

``phi`` is f for a scalar output and <w, f> for a seeded random cotangent w otherwise (g is then the
vjp of w, the gradient of phi). An error e in g leaves h <e, v> in r1, so r1 falls like h (slope 1 on a
log-log plot) once h is small enough for that term to beat the h^2 term: at h below about
|<e, v>| / |<v, H v>|. A gross error shows slope 1 at every step; an error of 1e-3 relative shows
slope 2 down to h ~ 1e-3 and slope 1 below it. So the verdict is read at the **small-step end**:

* points whose remainder is not well above the rounding floor (f's rounding, 4 eps sum|w_j f_j|, and
  its measured noise, times FLOOR_FACTOR; plus h times the rounding of <g, v> in the dtype under test)
  are dropped, as are non-finite ones (a step that left f's domain);
* the local slopes log2(r(h) / r(h/2)) between neighbouring points are classed as 1, 2 (or 3) when
  within BAND of it; the maximal runs of at least MIN_PAIRS neighbouring pairs of one class are the
  asymptotic candidates, and the run at the **smallest** steps decides (a larger-step run is the
  nonlinear regime, or the h^2 term of a small error that has not yet been overtaken);
* the reported slope is the least-squares slope of log r against log h over that run.

Verdicts: order 1: slope ~2 ``right``, ~1 ``wrong``; order 2: ~3 ``right``, ~2 or ~1 ``wrong``; no run
``undetermined``. A remainder at rounding level at every step means phi is exactly linear (order 1) or
quadratic (order 2) along v and the gradient (Hv) reproduces it: ``right`` with no slope. So does a
remainder that falls from well above the floor to rounding level at every smaller step, faster than any
power the test classifies (EXACT_DROP): phi is piecewise linear (quadratic) along v, the larger steps
reach across a kink or jump, and below it the gradient (Hv) reproduces phi exactly. An error e in
<g, v> would fade into rounding like h e, never at once, so it cannot look like this above the
resolution that verdict states.

The test's resolution is the smallest step it can use: an error in <g, v> below about
r(h_min) / h_min cannot show. The runner reports that figure with each verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.checks.context import EPS, CheckContext, Verdict
from gradcli.checks.comparisons.under_test import under_test_vjp

STEPS = 26  # h = 2^-1 ... 2^-26: f's rounding ends order 1 near 2^-23 and order 2 near 2^-15 in float64
FLOOR_FACTOR = 30.0  # a point counts when its remainder is this far above the rounding floor
BAND = 0.5  # a local slope within BAND of p is of class p
MIN_PAIRS = 3  # a run of at least this many neighbouring pairs (4 points) can decide
GRAD_ROUNDING = 100.0  # the gradient under test may be off by this many ulp of its dtype in <g, v>
#: A fall into rounding level steeper than slope order + EXACT_DROP is a kink left behind, not a fading term.
EXACT_DROP = 2.0


@dataclass
class TaylorResult:
    order: int  # 1: the gradient; 2: the Hessian-vector product as well
    slope: float | None  # the fitted slope over the deciding run (None: exact, or too few points)
    verdict: str  # right | wrong | undetermined
    detail: str  # one line: the steps it was read over, the resolution, or why it could not decide
    steps: list = field(default_factory=list)  # (h, r) of every step, r None where not usable
    resolution: float | None = None  # smallest |<e, v>| / |<g, v>| that would show (right verdicts)

    def to_dict(self) -> dict:
        return {"order": self.order, "slope": self.slope, "verdict": self.verdict, "detail": self.detail,
                "resolution": self.resolution}


def fit(h: np.ndarray, r: np.ndarray, floor: np.ndarray, order: int):
    """(slope, class or None, first, last index of the deciding run, usable mask); class 0: exact."""
    usable = np.isfinite(r) & (r > floor)
    if not usable.any():
        exact = np.isfinite(r).sum() >= len(r) // 2
        return None, (0 if exact else None), None, None, usable
    tail = exact_tail(h, r, floor, usable, order)
    if tail is not None:
        return None, 0, tail, None, usable
    classes = tuple(range(order + 1, 0, -1))
    runs, cur = [], None
    for i in range(len(h) - 1):
        cls = None
        if usable[i] and usable[i + 1]:
            s = np.log(r[i] / r[i + 1]) / np.log(h[i] / h[i + 1])
            cls = next((p for p in classes if abs(s - p) <= BAND), None)
        if cls is not None and cur is not None and cur[0] == cls and cur[2] == i:
            cur[2] = i + 1
        else:
            cur = [cls, i, i + 1] if cls is not None else None
            if cur is not None:
                runs.append(cur)
    runs = [c for c in runs if c[2] - c[1] >= MIN_PAIRS]
    if not runs:
        pts = np.flatnonzero(usable)
        slope = float(np.polyfit(np.log(h[pts]), np.log(r[pts]), 1)[0]) if len(pts) >= 2 else None
        return slope, None, None, None, usable
    cls, a, b = runs[-1]
    pts = np.arange(a, b + 1)
    slope = float(np.polyfit(np.log(h[pts]), np.log(r[pts]), 1)[0])
    return slope, cls, a, b, usable


def exact_tail(h, r, floor, usable, order: int):
    """The first of the smallest steps where the remainder is at rounding level, when at least
    MIN_PAIRS + 1 steps end the sweep so and the remainder falls into them faster than h^(order +
    EXACT_DROP) from one or two steps above; else None. See the module docstring."""
    last = int(np.flatnonzero(usable)[-1])
    a = last + 1
    if len(r) - a < MIN_PAIRS + 1 or not np.all(np.isfinite(r[a:])):
        return None
    for i in (last, last - 1):
        if i >= 0 and usable[i]:
            with np.errstate(divide="ignore"):
                drop = np.log(r[i] / floor[a]) / np.log(h[i] / h[a])
            if drop > order + EXACT_DROP:
                return a
    return None


def taylor_test(check: CheckContext, order: int = 1, hvp=None):
    """Run the test on a check's context -> TaylorResult, or the Verdict of the code under test raising.
    ``hvp(v, w) -> (Hv, error) | Verdict`` for order 2: the Hessian-vector product under test of
    phi = <w, f> at x for direction v (flat over the wrt inputs; w is the flat cotangent, [1.] for a
    scalar output)."""
    rng = np.random.default_rng([check.seed, 17])
    fn = check.numf
    v = num.random_directions(fn, 1, rng)[0]
    vflat = check.flat(v)
    w = np.ones(1) if check.scalar else rng.standard_normal(check.m)
    g = under_test_vjp(check, w)
    if isinstance(g, Verdict):
        return g
    gv = float(g @ vflat)
    g_round = GRAD_ROUNDING * EPS[check.dtype] * float(np.sum(np.abs(g * vflat)))
    quad, q_err = 0.0, 0.0
    if order == 2:
        got = hvp(v, w)
        if isinstance(got, Verdict):
            return got
        hv, hv_err = got
        quad = 0.5 * float(vflat @ hv)
        q_err = 0.5 * float(np.abs(vflat) @ (hv_err + GRAD_ROUNDING * EPS[check.dtype] * np.abs(hv)))
    f0 = check.f0
    phi0 = float(w @ f0)
    terms0 = float(np.abs(w) @ np.abs(f0))
    sig = num.noise_level(num.Function(lambda inputs, complex_ok=False: np.asarray(check.call(inputs)).ravel() @ w,
                                       check.base, check.wrt), np.array([phi0]),
                          np.random.default_rng([check.seed, 19]))
    sigma = float(np.max(sig)) if np.size(sig) else 0.0
    h = 2.0 ** -np.arange(1, STEPS + 1)
    r = np.full(STEPS, np.nan)
    floor = np.full(STEPS, np.inf)
    for i, t in enumerate(h):
        out = fn.at({k: fn.base[k] + t * v[k] for k in v})
        if out is None or out.shape != f0.shape or not np.all(np.isfinite(out)):
            continue
        phi = float(w @ out)
        r[i] = abs(phi - phi0 - t * gv - t * t * quad)
        rounding = 4 * num.EPS * (terms0 + float(np.abs(w) @ np.abs(out))) + 3 * sigma
        floor[i] = FLOOR_FACTOR * rounding + t * g_round + t * t * q_err
    slope, cls, a, b, usable = fit(h, r, floor, order)
    steps = [(float(t), float(x) if u else None) for t, x, u in zip(h, r, usable)]
    right_cls = order + 1
    if cls == 0:
        shape = "linear" if order == 1 else "quadratic"
        what = "gradient" if order == 1 else "Hv"
        if a is None:
            return TaylorResult(order, None, "right", f"the remainder is at rounding level at every step: phi is "
                                f"{shape} along v and the {what} reproduces it exactly", steps)
        # below h[a] an error term h^order e / order! would have stood above the floor
        bound = float(floor[a] / h[a] ** order) * (2 if order == 2 else 1)
        res = bound / max(abs(gv), 2 * abs(quad) if order == 2 else 0.0, 1e-300)
        term = "<g, v>" if order == 1 else "<v, Hv> (relative to max(|<g, v>|, |<v, Hv>|))"
        return TaylorResult(order, None, "right", f"the remainder falls to rounding level at once at h = "
                            f"2^-{a + 1} (a kink or jump along v, farther off) and stays there down to 2^-{STEPS}: phi "
                            f"is piecewise {shape} along v and the {what} reproduces it there; an error in {term} "
                            f"above ~{res:.1g} relative would have shown", steps, res)
    if cls is None:
        why = ("no step leaves a remainder above the rounding floor" if not usable.any() else
               f"no {MIN_PAIRS + 1} neighbouring steps share a slope near "
               + " or ".join(str(p) for p in range(order + 1, 0, -1)))
        return TaylorResult(order, slope, "undetermined", why, steps)
    span = f"h = 2^-{a + 1} .. 2^-{b + 1}"
    if cls == right_cls:
        scale = abs(gv) if order == 1 else max(abs(quad), 1e-300)
        res = float(r[b] / h[b] / max(abs(gv), 1e-300)) if order == 1 else float(r[b] / h[b] ** 2 / scale)
        what = "<g, v>" if order == 1 else "<v, Hv>"
        return TaylorResult(order, slope, "right", f"slope {slope:.2f} over {span}: an error in {what} above "
                            f"~{res:.1g} relative would have shown", steps, res)
    return TaylorResult(order, slope, "wrong", f"slope {slope:.2f} over {span} (expected {right_cls}: the "
                        + ("gradient" if order == 1 or cls == 1 else "Hessian-vector product")
                        + " is wrong along v)", steps)
