"""Finite differences of numpy functions of arrays, with error estimates, for ``gradcli check``.

The ideas of :mod:`gradcli.methods.numeric`, applied to a user's function of named arrays. Every
estimate is a derivative along one direction ``u`` (a scaled unit vector for one element, or a seeded
random vector) of ``phi(t) = f(x + t*u)``, for every output element at once:

* **first pass** (6 calls): central differences D(H), D(2H), D(4H) and one Richardson step
  R1 = (4 D(H) - D(2H)) / 3. Its error estimate is |R1 - R2| with R2 = (4 D(2H) - D(4H)) / 3, whose
  truncation error is 16 times R1's, so the estimate is deliberately pessimistic; plus f's rounding
  amplified by the step, 8 eps |f| / H.
* **refinement** (2 calls a row, only where the first pass is not good enough, not finite, or looks
  like a kink): Ridders' tableau over steps 4H, 2H, H, H/2, ... down to 4H / 2**15 (steps that leave
  the domain of f give nan rows, which the tableau skips), stopping where round-off takes over.
* **kinks**: the one-sided difference s(t) = (phi(t) - 2 phi(0) + phi(-t)) / t is t * f'' for a smooth
  function and the jump of the slope at a kink. Only when it stays the same from t = H down to
  t = H / 2**14 is the point called a kink (conservative: a kink near, but not at, the point is
  resolved by the smaller steps instead).

Steps are relative: element i of input k moves by t * max(|x_i|, rms(x_k)) (1 where x_k is all zeros),
with H = 2**-10 (about eps**(1/5), the best step for one Richardson step in float64) unless ``eps``
says otherwise. Complex step (one call per element, exact to rounding where f is holomorphic) is
offered separately; the runner uses it only where it agrees with these estimates. Where f offers batches
(a torch Function's forward under vmap), the same steps are evaluated many per call
(gradcli.checks.comparisons.batched_steps).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gradcli.core.constants import CHECK_RIDDERS_ROWS, COMPLEX_H
from gradcli.checks.comparisons.batched_steps import at_many, prefetch
from gradcli.methods.tableau import TABLEAU_BLOCK, ridders

EPS = np.finfo(np.float64).eps
H_DEFAULT = 2.0 ** -10
KINK_SMALL = 2.0 ** -14  # the kink test's smallest step, relative to H
COMPLEX_MAX = 500  # complex step on at most this many elements (one call each)
NOISE_POINTS = 7
NOISE_STEP = 1e-6


@dataclass
class Estimate:
    """Derivatives along one direction, per output element, with error estimates and kink flags."""

    value: np.ndarray  # (m,)
    error: np.ndarray  # (m,); inf where no estimate
    kink: np.ndarray  # (m,) bool


class Function:
    """``f`` as numerics see it: named float64 arrays in, the flattened float64 output out.

    Exceptions and non-finite outputs at perturbed points are results (nan: the step left the domain),
    never raised: the runner has already called ``f`` at the point itself.
    """

    def __init__(self, call, base: dict, wrt: list):
        self.call, self.base, self.wrt = call, base, list(wrt)
        self.calls = 0
        self.scales = {k: element_scale(base[k]) for k in self.wrt}
        # f at many points in one evaluation (a framework's vmap), where the call offers it: None -> the loop
        self.batch = getattr(call, "batch", None)
        self.trusted = False  # whether the batch has shown that it gives what single calls give

    def at_many(self, moved: list, f0: np.ndarray) -> list:
        """``at`` of each of ``moved``, batched where the call offers it (gradcli.checks.comparisons.batched_steps)."""
        return at_many(self, moved, f0)

    def at(self, moved: dict) -> np.ndarray:
        self.calls += 1
        inputs = {**self.base, **moved}
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = self.call(inputs)
            return np.asarray(out, dtype=np.float64).ravel()
        except Exception:  # noqa: BLE001 - a perturbed point outside f's domain
            return None

    def complex_at(self, moved: dict):
        """f at complex inputs -> complex output, or None if f cannot take them."""
        self.calls += 1
        inputs = {**self.base, **moved}
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = self.call(inputs, complex_ok=True)
            out = np.asarray(out)
            return out.ravel() if out.dtype.kind == "c" else None
        except Exception:  # noqa: BLE001
            return None


def element_scale(x: np.ndarray) -> np.ndarray:
    """Per element, the length over which steps are measured: max(|x_i|, rms(x)), or 1 for all-zero x."""
    x = np.asarray(x, dtype=np.float64)
    rms = float(np.sqrt(np.mean(x * x))) if x.size else 1.0
    return np.maximum(np.abs(x), rms if rms > 0 and np.isfinite(rms) else 1.0)


class _Line:
    """phi(t) = f(x + t*u) with its evaluations cached; ``t`` is returned as actually taken."""

    def __init__(self, fn: Function, f0: np.ndarray, move):
        self.fn, self.f0, self.move = fn, f0, move  # move(t) -> ({name: array}, actual t)
        self.cache = {}

    def __call__(self, t):
        if t not in self.cache:
            moved, actual = self.move(t)
            self.keep(t, self.fn.at(moved), actual)
        return self.cache[t]

    def keep(self, t, out, actual):
        if out is None or out.shape != self.f0.shape:
            out = np.full(self.f0.shape, np.nan)
        self.cache[t] = (out, actual)

    # f may be infinite or NaN at a step (a pole, a domain edge, overflow): the quotient is then inf or
    # NaN, which every estimate reads as "no estimate", so numpy's warnings about it say nothing
    def central(self, t):
        (fp, tp), (fm, tm) = self(t), self(-t)
        with np.errstate(all="ignore"):
            return (fp - fm) / (tp - tm)

    def bend(self, t):
        """(phi(t) - 2 phi(0) + phi(-t)) / t: t*f'' when smooth, the slope's jump at a kink."""
        (fp, tp), (fm, tm) = self(t), self(-t)
        with np.errstate(all="ignore"):
            return (fp - 2 * self.f0 + fm) / ((tp - tm) / 2)


#: the first pass's steps, relative to H, in the order its differences ask for them
FIRST_STEPS = (1.0, -1.0, 2.0, -2.0, 4.0, -4.0)


def first_pass(line: _Line, H: float) -> dict:
    prefetch(line.fn, [(line, s * H) for s in FIRST_STEPS])
    D1, D2, D4 = line.central(H), line.central(2 * H), line.central(4 * H)
    F = np.fmax(np.abs(line.f0), np.fmax(np.abs(line(H)[0]), np.abs(line(-H)[0])))
    noise = 8 * EPS * F / H
    with np.errstate(all="ignore"):  # inf - inf where f was infinite at two steps: NaN, no estimate
        R1, R2 = (4 * D1 - D2) / 3, (4 * D2 - D4) / 3
        err = np.abs(R1 - R2) + noise
    err = np.where(np.isfinite(err) & np.isfinite(R1), err, np.inf)
    s1, s2, s4 = np.abs(line.bend(H)), np.abs(line.bend(2 * H)), np.abs(line.bend(4 * H))
    size = np.nanmax(np.abs(np.where(np.isfinite(R1), R1, 0.0)), initial=0.0)
    kinky = (s1 > 1e-4 * size + 100 * noise) & (s1 >= 0.75 * s2) & (s2 >= 0.75 * s4) & np.isfinite(err)
    return {"value": R1, "error": err, "kink_candidate": kinky, "noise": noise, "F": F}


def refine(line: _Line, H: float, first: dict, need: np.ndarray) -> Estimate:
    """Ridders' tableau where ``need``; the first pass elsewhere; kinks confirmed at tiny steps."""
    value, error = first["value"].copy(), first["error"].copy()
    kink = np.zeros(value.shape, dtype=bool)
    if not need.any():
        return Estimate(value, error, kink)
    cand = first["kink_candidate"] & need
    if cand.any():
        tau = H * KINK_SMALL
        sa, sb = line.bend(tau), line.bend(2 * tau)
        size = np.nanmax(np.abs(np.where(np.isfinite(value), value, 0.0)), initial=0.0)
        thresh = 1e-4 * size + 100 * (8 * EPS * first["F"] + first.get("floor", 0.0) * H) / tau
        with np.errstate(all="ignore"):
            ratio = np.abs(sa) / np.abs(sb)
        kink = cand & (np.abs(sa) > thresh) & (ratio > 0.7) & (ratio < 1.4) & (np.sign(sa) == np.sign(sb))
    steps = [4 * H / 2.0 ** k for k in range(CHECK_RIDDERS_ROWS)]
    noise_h = first.get("floor", 0.0) * H  # a difference quotient's rounding noise, times its step

    def row(i):
        if steps[i] not in line.cache:  # where f takes batches, this row and the next few in one
            prefetch(line.fn, [(line, sign * t) for t in steps[i:i + TABLEAU_BLOCK] for sign in (1.0, -1.0)])
        # a step whose rounding noise alone exceeds what the first pass achieved cannot improve on it
        # (float32 inside f: at tiny steps f is flat and the quotients agree on a confident 0)
        with np.errstate(all="ignore"):
            return np.where(noise_h / steps[i] > first["error"], np.nan, line.central(steps[i]))

    with np.errstate(all="ignore"):
        best, err = ridders(row, CHECK_RIDDERS_ROWS, value.shape, done=~need | kink)
    with np.errstate(all="ignore"):
        err = err + 8 * EPS * (np.abs(best) + first["F"] / (4 * H))
        # where the first pass had an estimate, a gap beyond it means the tableau agreed by luck
        gap = np.abs(best - first["value"]) - 10 * first["error"]
    err = np.where(np.isfinite(gap), np.maximum(err, gap), err)
    better = need & ~kink & np.isfinite(best) & (err < error)
    value = np.where(better, best, value)
    error = np.where(better, np.fmax(err, first.get("floor", 0.0)), error)
    return Estimate(value, error, kink)


def refine_steps(H: float, kink_candidate) -> list:
    """The steps ``refine`` will most likely ask for beyond the first pass's: the tableau's rows to where
    most entries stop, and the kink test's where a kink is suspected (fetched ahead in one batch; a row
    fetched and not read changes nothing)."""
    rows = [4 * H / 2.0 ** k for k in range(3, min(TABLEAU_BLOCK, CHECK_RIDDERS_ROWS))]
    tau = H * KINK_SMALL
    kinks = [tau, 2 * tau] if np.any(kink_candidate) else []
    return [sign * t for t in rows + kinks for sign in (1.0, -1.0)]


def add_rounding_floor(first: dict, terms: np.ndarray, H: float, sigma=0.0) -> None:
    """Rounding that looks the same at every step cannot show in the differences: f = sum of many terms
    that cancel (sum(tanh(x*w)) over symmetric x) carries eps * sum|terms| whatever the step. ``terms``
    estimates sum|terms| (per output) from the derivatives themselves: sum_j |df/dx_j| * scale_j;
    ``sigma`` is f's measured noise (:func:`noise_level`), e.g. float32 rounding inside f."""
    floor = np.fmax(8 * EPS * np.fmax(first["F"], terms), 3 * sigma) / H
    first["floor"] = floor
    first["error"] = np.fmax(first["error"], floor)


# --- the two kinds of direction ----------------------------------------------------------------------

def element_move(fn: Function, name: str, i: int):
    """Moving one element: ``u = scale_i * e_i``; the actual step keeps (x + h) - x == h exact."""
    x = fn.base[name]
    s = float(fn.scales[name].flat[i])

    def move(t):
        a = x.copy()
        a.flat[i] = x.flat[i] + t * s
        return {name: a}, float((a.flat[i] - x.flat[i]) / s)
    return move, s


def direction_move(fn: Function, u: dict):
    def move(t):
        return {k: fn.base[k] + t * u[k] for k in u}, t
    return move


@dataclass
class Columns:
    """Numerical Jacobian columns for chosen elements: ``value[:, c]`` is d(output)/d(element c)."""

    elements: list  # (input name, flat index) per column
    value: np.ndarray  # (m, len(elements))
    error: np.ndarray
    kink: np.ndarray  # (m, len(elements)) bool
    complex_value: np.ndarray | None = None  # (m, len(elements)) or None where f takes no complex input


def jacobian_columns(fn: Function, f0: np.ndarray, elements: list, H: float, target_rel: float,
                     complex_step: bool = True, n_total: int = 0, sigma=0.0) -> Columns:
    """First pass on every element, then refinement where the error estimate exceeds ``target_rel``
    times max(|value|, the median |value| of that input): the tolerance the comparison will need."""
    m = f0.size
    n = len(elements)
    lines = [(_Line(fn, f0, move), s) for move, s in (element_move(fn, name, i) for name, i in elements)]
    prefetch(fn, [(line, s * H) for line, _ in lines for s in FIRST_STEPS])
    firsts = [first_pass(line, H) for line, _ in lines]
    value = np.empty((m, n))
    error = np.empty((m, n))
    kink = np.zeros((m, n), dtype=bool)
    raw = np.stack([f["value"] for f in firsts], axis=1) if n else np.empty((m, 0))
    scales = np.array([s for _, s in lines])
    finite_raw = np.where(np.isfinite(raw), np.abs(raw), 0.0)
    terms = finite_raw.sum(axis=1) * (max(n_total, n) / max(n, 1))
    for first in firsts:
        add_rounding_floor(first, terms, H, sigma)
    typical = _typical_by_input(raw / np.where(scales > 0, scales, 1.0), elements)
    needs = [~np.isfinite(first["error"]) | first["kink_candidate"] | (
        first["error"] > target_rel * np.fmax(np.abs(first["value"]), typical[:, c] * s))
        for c, ((line, s), first) in enumerate(zip(lines, firsts))]
    prefetch(fn, [(line, t) for (line, _), first, need in zip(lines, firsts, needs) if need.any()
                  for t in refine_steps(H, first["kink_candidate"] & need)])
    for c, ((line, s), first, need) in enumerate(zip(lines, firsts, needs)):
        est = refine(line, H, first, need)
        value[:, c], error[:, c], kink[:, c] = est.value / s, est.error / s, est.kink
    cols = Columns(list(elements), value, error, kink)
    if complex_step and 0 < n <= COMPLEX_MAX:
        cols.complex_value = _complex_columns(fn, elements, m)
    return cols


def _typical_by_input(values: np.ndarray, elements: list) -> np.ndarray:
    """Per column, the median |value| over the columns of the same input (per output row)."""
    out = np.zeros_like(values)
    names = np.array([name for name, _ in elements], dtype=object)
    for name in dict.fromkeys(names):
        cols = names == name
        block = np.abs(values[:, cols])
        block = np.where(np.isfinite(block), block, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            med = np.nanmedian(block, axis=1) if block.size else np.zeros(values.shape[0])
        out[:, cols] = np.nan_to_num(med)[:, None]
    return out


def _complex_columns(fn: Function, elements: list, m: int):
    cols = np.full((m, len(elements)), np.nan)
    for c, (name, i) in enumerate(elements):
        x = fn.base[name]
        s = float(fn.scales[name].flat[i])
        a = x.astype(np.complex128)
        h = COMPLEX_H * s
        a.flat[i] += 1j * h
        out = fn.complex_at({name: a})
        if out is None or out.size != m:
            return None  # f does not take complex inputs (or drops the imaginary part): no complex step
        cols[:, c] = out.imag / h
    return cols


def noise_level(fn: Function, f0: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """f's noise (per output element) along a random direction, from difference tables at tiny steps
    (after Moré & Wild's ECnoise): a smooth f contributes nothing to 3rd..6th differences at steps of
    1e-6, so what is left there is rounding, such as float32 arithmetic inside a float64 function."""
    u = random_directions(fn, 1, rng)[0]
    rows = [f0]
    moved = [{name: fn.base[name] + k * NOISE_STEP * u[name] for name in u} for k in range(1, NOISE_POINTS)]
    outs = fn.at_many(moved, f0) if fn.batch is not None else None
    for k in range(1, NOISE_POINTS):
        out = outs[k - 1] if outs is not None else fn.at(moved[k - 1])
        if out is None or out.shape != f0.shape or not np.all(np.isfinite(out)):
            return np.zeros(f0.shape)
        rows.append(out)
    table = np.stack(rows)
    # in units of the largest |f| per element: squares of values near 1e308 would overflow
    unit = np.max(np.abs(table), axis=0)
    unit = np.where(unit > 0, unit, 1.0)
    table = table / unit
    sigmas = []
    for j in range(1, NOISE_POINTS):
        table = np.diff(table, axis=0)
        if j >= 3:
            gamma = float(np.prod(np.arange(1, j + 1)) ** 2 / np.prod(np.arange(1, 2 * j + 1)))
            sigmas.append(np.sqrt(gamma * np.mean(table ** 2, axis=0)))
    return unit * np.median(np.stack(sigmas), axis=0)


def size_and_curvature(fn: Function, f0: np.ndarray, u: dict, H: float):
    """Along ``u``, per output element: (max |f| at 0 and at the steps +-H, +-2H, +-4H, max |phi''| by
    second differences at those steps), the two sizes an exactly zero derivative is judged against
    (gradcli.verdict.tolerance.exact_zero_scale). Steps where f is not finite are left out."""
    line = _Line(fn, f0, direction_move(fn, u))
    sizes, bends = [np.abs(f0)], []
    with np.errstate(all="ignore"):
        for t in (H, 2 * H, 4 * H):
            (fp, _), (fm, _) = line(t), line(-t)
            sizes += [np.abs(fp), np.abs(fm)]
            bends.append(np.abs(fp - 2 * f0 + fm) / (t * t))

    def largest(rows):
        rows = np.stack(rows)
        return np.max(np.where(np.isfinite(rows), rows, 0.0), axis=0)
    return largest(sizes), largest(bends)


#: one-sided differences at a kink start at this share of H: the kink test saw the kink at x down to
#: H * KINK_SMALL, so steps this small stay on one side of it and of any other kink near x
ONE_SIDED = 2.0 ** -8


def one_sided(fn: Function, f0: np.ndarray, move, H: float):
    """The one-sided derivatives of f at x along ``move`` (element_move or direction_move): per output
    element (from the left, from the right, error estimate), each Richardson's step over forward
    differences at steps t, 2t, 4t (t = H * ONE_SIDED), whose first-order error it removes; the error is
    the change to the next step plus f's rounding at the step."""
    line = _Line(fn, f0, move)
    sides, err = [], 0.0
    for sign in (-1.0, 1.0):
        with np.errstate(all="ignore"):
            d = []
            for t in (H * ONE_SIDED, 2 * H * ONE_SIDED, 4 * H * ONE_SIDED):
                out, actual = line(sign * t)
                d.append((out - f0) / actual)
            r1, r2 = 2 * d[0] - d[1], 2 * d[1] - d[2]
            size = np.fmax(np.abs(f0), np.abs(line(sign * H * ONE_SIDED)[0]))
            err = err + np.abs(r1 - r2) + 8 * EPS * size / (H * ONE_SIDED)
        sides.append(r1)
    err = np.where(np.isfinite(err), err, np.inf)
    return sides[0], sides[1], err


def directional(fn: Function, f0: np.ndarray, u: dict, H: float, target_rel: float,
                typical: np.ndarray | None = None, sigma=0.0) -> Estimate:
    """J u (per output element) by differences along ``u``, refined where needed."""
    line = _Line(fn, f0, direction_move(fn, u))
    first = first_pass(line, H)
    n = sum(fn.base[k].size for k in fn.wrt)
    add_rounding_floor(first, np.sqrt(n) * np.where(np.isfinite(first["value"]), np.abs(first["value"]), 0.0), H,
                       sigma)
    size = np.fmax(np.abs(first["value"]), 0.0 if typical is None else typical)
    need = ~np.isfinite(first["error"]) | first["kink_candidate"] | (first["error"] > target_rel * size)
    return refine(line, H, first, need)


def complex_directional(fn: Function, u: dict, m: int):
    """J u by complex step, or None."""
    h = COMPLEX_H
    out = fn.complex_at({k: fn.base[k] + 1j * h * u[k] for k in u})
    if out is None or out.size != m:
        return None
    return out.imag / h


def random_directions(fn: Function, k: int, rng: np.random.Generator) -> list:
    """``k`` directions, standard normal per element times the element's step scale."""
    return [{name: rng.standard_normal(fn.base[name].shape) * fn.scales[name] for name in fn.wrt}
            for _ in range(k)]
