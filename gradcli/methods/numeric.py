"""Numerical differentiation: central differences, Richardson extrapolation, complex step.

These methods only *evaluate* the graph (``graph.evaluate``); they never read the partials of the
primitive table, which is what makes them an independent check of forward and reverse mode. All the
perturbed points of one method go through the graph in one vectorised evaluation (in blocks of
variables when there are many).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import functools

import numpy as np

from ..diagnose import straddles
from ..graph import Graph, evaluate
from ..primitives import PRIMITIVES
from ..verdict.constants import (CENTRAL_CANDIDATES, COMPLEX_H, ESTIMATE_GAP, RIDDERS_CON, RIDDERS_H0,
                                 RIDDERS_ROWS)
from ..verdict.differences import representable, ridders

#: Elements per vectorised evaluation when the variables are many (memory stays near 100 MB).
BLOCK_ELEMENTS = 2_000_000


@dataclass
class NumericResult:
    """A numerical Jacobian with its own error estimate (same shape), or why there is none."""

    jacobian: np.ndarray | None
    error: np.ndarray | None = None
    steps: np.ndarray | None = None
    status: str = "ok"
    message: str = ""
    detail: dict = field(default_factory=dict)


def _quiet(fn):
    """Run under np.errstate(all="ignore"): non-finite values are results here, reported as statuses."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return wrapper


def _stencil(graph: Graph, x: np.ndarray, deltas: np.ndarray, jiggle=None) -> np.ndarray:
    """f(x + deltas[i, j] * e_j) for every stencil row i and variable j -> array (n_out, m, nvars).

    Variables go through in blocks: inside a block each perturbed variable is an array and every other
    variable stays a scalar, so memory grows like m * block**2, not m * nvars**2 (2,000 variables
    would otherwise need gigabytes). ``jiggle(i)`` gives per-row rounding signs (length m) for node i.
    """
    m, n = deltas.shape
    if n == 0:  # a constant expression: nothing to perturb
        return np.zeros((len(graph.outputs), m, 0))
    block = max(1, min(n, int(np.sqrt(BLOCK_ELEMENTS / m))))
    out = None
    for start in range(0, n, block):
        b = min(block, n - start)
        inputs = {}
        for k, name in enumerate(graph.variables):
            if start <= k < start + b:
                col = np.full((b, m), x[k], dtype=np.result_type(x, deltas))
                col[k - start] = x[k] + deltas[:, k]
                inputs[name] = col.ravel()
            else:
                inputs[name] = x[k]
        jig = None if jiggle is None else (lambda i: np.tile(jiggle(i), b))
        with np.errstate(all="ignore"):
            outs = evaluate(graph, inputs, jiggle=jig)
        F = np.stack([np.broadcast_to(o, (b * m,)) for o in outs]).reshape(len(outs), b, m)
        if out is None:
            out = np.empty((len(outs), m, n), dtype=F.dtype)
        out[:, :, start:start + b] = F.transpose(0, 2, 1)
    return out


def _x_vector(graph: Graph, point: dict, dtype=np.float64) -> np.ndarray:
    return np.array([point[v] for v in graph.variables], dtype=dtype)


def _candidate_scales(x: np.ndarray) -> np.ndarray:
    """Per variable, the length scales over which f might vary: powers of ten from 1e-6*min(|x|, 1)
    (room to fit beside a domain edge) up to max(|x|, 1) (a relative step for large x)."""
    ax = np.abs(x)
    lo = np.log10(np.where(ax > 0, np.minimum(ax, 1.0), 1.0)) - 6
    hi = np.log10(np.maximum(ax, 1.0))
    k = np.linspace(0.0, 1.0, CENTRAL_CANDIDATES)
    return 10.0 ** (hi[:, None] - (hi - lo)[:, None] * k[None, :])  # (nvars, K), largest first


#: variables x nodes up to which central differences check their stencils for kinks, jumps and poles
STRADDLE_BUDGET = 20_000


def _central_candidates(graph: Graph, x: np.ndarray, stencil=None, noise_scale=None):
    """Central differences at steps h, 2h, 4h for every candidate scale, with error estimates.

    ``stencil(x, deltas)`` -> (n_out, m, nvars) replaces the graph's evaluation (the Hessian
    differences the reverse gradient this way); without rounding signs, round-off is estimated from
    the bound alone."""
    eps = np.finfo(np.float64).eps
    scales = _candidate_scales(x)
    K = scales.shape[1]
    n = x.size
    hs = np.stack([representable(x, eps ** (1 / 3) * scales[:, k]) for k in range(K)])  # (K, nvars)
    offsets = np.array((1.0, -1.0, 2.0, -2.0, 4.0, -4.0))
    deltas = (offsets[None, :, None] * hs[:, None, :]).reshape(K * len(offsets), n)
    shape = lambda F: F.reshape(F.shape[0], K, len(offsets), n).transpose(1, 2, 0, 3)  # (K, 6, nout, n)
    Fv = shape(_stencil(graph, x, deltas) if stencil is None else stencil(x, deltas))
    h = hs[:, None, :]
    D1 = (Fv[:, 0] - Fv[:, 1]) / (2 * h)
    side = np.tile(np.sign(offsets), K)
    jiggle = np.zeros_like(D1)
    patterns = (lambda i: side * (-1.0) ** i, lambda i: side * (-1.0) ** (i // 2))
    for pattern in patterns if stencil is None else ():
        Fj = shape(_stencil(graph, x, deltas, jiggle=pattern))
        jiggle = np.fmax(jiggle, 4 * np.abs((Fj[:, 0] - Fj[:, 1]) / (2 * h) - D1))
    D2 = (Fv[:, 2] - Fv[:, 3]) / (4 * h)
    D4 = (Fv[:, 4] - Fv[:, 5]) / (8 * h)
    # round-off: f's own rounding, plus the rounding of intermediate values as large as x (sin(100*x)
    # at x = 1e4 carries eps*1e6 in its argument), which does not look like noise across nearby steps.
    # On a graph the rounding probes (one more ulp per operation) measure it; a stencil without them
    # takes the bound eps*|x*f'| (which would also charge sin(x) at x = 1e15, whose steps are exact)
    bound = 0.0 if stencil is None else np.abs(x)[None, None, :] * np.abs(D1)
    noise = 4 * eps * ((np.abs(Fv[:, 0]) + np.abs(Fv[:, 1])) / 2 + bound) / h
    noise = np.fmax(noise, jiggle)
    if noise_scale is not None:  # outputs that cancel carry rounding relative to their terms, not to |f|
        noise = np.fmax(noise, 8 * eps * np.asarray(noise_scale, dtype=float)[None, :, None] / h)
    d1, d2 = np.abs(D2 - D1), np.abs(D4 - D2)
    # in the asymptotic range the error falls like h**2, so D(4h)-D(2h) is about 4 times
    # D(2h)-D(h); anything else (a period or a pole within the stencil) voids the estimate
    asymptotic = (d1 <= 2 * noise) | ((d2 >= 2 * d1) & (d2 <= 8 * d1))
    own = np.where(asymptotic, d1 / 3 + noise, np.inf)
    own = np.where(np.isfinite(own) & np.isfinite(D1), own, np.inf)
    # a stencil that reaches across a kink, jump or pole averages two sides (one graph evaluation per
    # variable: skipped for large graphs, where it would cost more than everything else)
    if graph is not None and len(graph.variables) * len(graph.nodes) <= STRADDLE_BUDGET:
        pts = {v: np.full(K, x[j]) for j, v in enumerate(graph.variables)}
        for k in range(n):
            with np.errstate(all="ignore"):
                hit = straddles(graph, pts, k, 4 * hs[:, k], np, np.float64, K)
            own[hit, :, k] = np.inf
    # no step can be in the h**2 regime when a smaller one is clearly out of it (not merely noisy): at
    # sin(x) at 1e16 or tan(x) next to pi/2 the smallest step float64 allows already spans a period or
    # the pole, and a huge step that looks converged (it spans a near-whole number of periods) is not
    out = ~asymptotic & (d1 > 8 * noise) & np.isfinite(D1)
    smaller_out = np.flip(np.logical_or.accumulate(np.flip(out, axis=0), axis=0), axis=0)
    void = np.zeros_like(out)
    void[:-1] = smaller_out[1:]
    own = np.where(void, np.inf, own)
    # a step is only as good as its agreement with every smaller one, beyond their own error:
    # for abs(x) at x = 1e-160 all steps above 1e-160 agree on 0, and only the smaller ones know
    est = own.copy()
    for k in range(K - 1):
        gap = np.abs(D1[k] - D1[k + 1:]) - own[k + 1:]
        gap = np.where(np.isfinite(gap), gap, 0.0)
        est[k] = np.maximum(est[k], gap.max(axis=0))
    return D1, est, hs, scales


@_quiet
def central(graph: Graph, point: dict) -> NumericResult:
    """Central differences (f(x+h) - f(x-h)) / 2h with h = eps**(1/3) * s, the step that balances
    truncation (h**2) against round-off (eps/h). The scale s is not guessed: every candidate from
    1e-6*min(|x|, 1) to max(|x|, 1) is tried in one evaluation and the one with the smallest error
    estimate wins (truncation from the steps 2h and 4h, round-off as eps*|f|/h)."""
    x = _x_vector(graph, point)
    return best_central(*_central_candidates(graph, x))


def best_central(D1, est, hs, scales) -> NumericResult:
    """Per entry, the candidate step with the smallest error estimate."""
    best = np.argmin(est, axis=0)  # (nout, n)
    pick = lambda A: np.take_along_axis(A, best[None], axis=0)[0]
    J, err = pick(D1), pick(est)
    steps = np.take_along_axis(hs, np.argmin(est.max(axis=1), axis=0)[None], axis=0)[0]
    # the candidates and the pick per entry, for `gradcli explain` (data only: results do not read it)
    res = NumericResult(J, err, steps, detail={"step": steps.tolist(), "candidate_steps": hs,
                                               "candidate_estimates": D1, "candidate_errors": est,
                                               "chosen": best})
    if not np.all(np.isfinite(err)):
        res.status = "unavailable"
        res.message = "no finite-difference stencil fits inside the domain of the function"
        res.jacobian = np.where(np.isfinite(err), J, np.nan)
    return res


@_quiet
def central_of(stencil, x: np.ndarray, noise_scale=None) -> NumericResult:
    """:func:`central` for any vector function given as ``stencil(x, deltas) -> (n_out, m, nvars)``;
    ``noise_scale`` (per output) is the size its rounding is relative to, when that is more than |f|."""
    return best_central(*_central_candidates(None, np.asarray(x, dtype=np.float64), stencil, noise_scale))


@_quiet
def richardson(graph: Graph, point: dict) -> NumericResult:
    """Ridders' extrapolation of central differences over steps h0, h0/2, h0/4, ...: each column of
    the tableau cancels one more power of h**2; the entry with the smallest change between
    neighbouring orders is the estimate and that change is its error estimate."""
    x = _x_vector(graph, point)
    eps = np.finfo(np.float64).eps
    c = central(graph, point)
    # start where central differences found f's length scale: h0 is a few thousand times their step
    h0 = RIDDERS_H0 * c.steps / np.finfo(np.float64).eps ** (1 / 3)
    hs = [representable(x, h0 / RIDDERS_CON ** k) for k in range(RIDDERS_ROWS)]
    # every row of the tableau in one evaluation: rows +h_k, -h_k
    deltas = np.stack([sign * hk for hk in hs for sign in (1.0, -1.0)])
    Fv = _stencil(graph, x, deltas)
    D = [(Fv[:, 2 * k] - Fv[:, 2 * k + 1]) / (2 * hs[k]) for k in range(RIDDERS_ROWS)]

    trace: dict = {}
    best, err = ridders(lambda i: D[i], RIDDERS_ROWS, D[0].shape, trace=trace)
    f0 = np.abs(_stencil(graph, x, np.zeros((1, x.size)))[:, 0, :1])
    err = err + 8 * eps * (np.abs(best) + f0 / h0)  # the extrapolated value still carries f's rounding
    # cross-check with plain central differences: a gap beyond central's own error bound means the
    # tableau agreed by luck, and the estimate must say so
    # (where central differences have no estimate of their own, their whole gap counts)
    gap = np.abs(best - c.jacobian) - np.where(np.isfinite(c.error), ESTIMATE_GAP * c.error, 0.0)
    err = np.where(np.isfinite(gap), np.maximum(err, gap), err)
    err = np.where(np.isfinite(c.error), err, np.inf)  # no step of central's to start from: nothing to say
    res = NumericResult(best, err, np.array(hs), detail={"h0": h0.tolist(), "ratio": RIDDERS_CON,
                                                         "rows": RIDDERS_ROWS, **trace})
    if not np.all(np.isfinite(best)):
        res.status = "unavailable"
        res.message = "no finite Richardson estimate: the stencil leaves the domain of the function"
    return res


def holomorphic_blockers(graph: Graph) -> list[str]:
    """Primitives on a differentiated path that complex step cannot pass through."""
    names = []
    for node, act in zip(graph.nodes, graph.active):
        if act and node.op in PRIMITIVES and not PRIMITIVES[node.op].holomorphic and node.op not in names:
            names.append(node.op)
    return names


@_quiet
def complex_step(graph: Graph, point: dict) -> NumericResult:
    """f'(x) = Im f(x + ih) / h: no subtraction, so no cancellation, exact to rounding for any
    small h; only valid where every primitive on the path is holomorphic."""
    blockers = holomorphic_blockers(graph)
    if blockers:
        return NumericResult(None, status="unavailable",
                             message=f"complex step cannot pass through {', '.join(blockers)} "
                                     "(not holomorphic)")
    x = _x_vector(graph, point)
    # three steps: relative to |x| (right for log(x) at tiny x), absolute for |x| < 1 (keeps f'*h from
    # underflowing), and 1e-10 times smaller (exposes structure finer than the step); any of them
    # would do for a well-behaved f, so where they differ, the difference is the error estimate
    h = np.where(x == 0, COMPLEX_H, np.maximum(COMPLEX_H * np.abs(x), 1e-300))
    steps = (h, COMPLEX_H * np.maximum(np.abs(x), 1.0), np.maximum(h * 1e-10, 1e-300))
    Fv = _stencil(graph, x, 1j * np.stack(steps))
    J, *others = [np.imag(Fv[:, k]) / step for k, step in enumerate(steps)]
    eps = np.finfo(np.float64).eps
    spread = np.maximum.reduce([np.abs(J - Jk) for Jk in others])
    # below |x| = 1e-280 the relative step would underflow and the floor of 1e-300 is no longer small
    # against x (sqrt(x) at 1e-305): no step of this kind is valid there
    J = np.where(((x == 0) | (COMPLEX_H * np.abs(x) >= 1e-300))[None, :], J, np.nan)
    res = NumericResult(J, 4 * eps * np.abs(J) + spread, h, detail={"step": h.tolist()})
    if not np.all(np.isfinite(J)):
        res.status = "unavailable"
        res.message = "complex-step evaluation is not finite"
    return res
