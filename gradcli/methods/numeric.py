"""Numerical differentiation: central differences, Richardson extrapolation, complex step.

These methods only *evaluate* the graph (``graph.evaluate``); they never read the partials of the
primitive table, which is what makes them an independent check of forward and reverse mode. All the
perturbed points of one method go through the graph in one vectorised evaluation (in blocks of
variables when there are many).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.methods.differences import straddles
from gradcli.core.graph import Graph, evaluate
from gradcli.core.primitives import PRIMITIVES
from gradcli.core.constants import CENTRAL_CANDIDATES, COMPLEX_H, RIDDERS_CON, RIDDERS_ROWS, STRADDLE_BUDGET
from gradcli.methods import differences
from gradcli.methods.differences import best_central, central_candidates, quiet, rounding_scale

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


def _rows(graph, x):
    """Stencil rows at one point: deltas (M, n, 1) -> outputs (n_out, M, n, 1)."""
    return lambda deltas: _stencil(graph, x, deltas[..., 0])[..., None]


def _probe(graph, x):
    """Stencil rows at one point rounded one more ulp per operation: (deltas (M, n, 1), signs) -> outputs."""
    return lambda deltas, signs: _stencil(graph, x, deltas[..., 0], jiggle=signs)[..., None]


def _candidates(graph, x, stencil=None, noise_scale=None):
    """The candidates of :func:`gradcli.methods.differences.central_candidates` at one point (P = 1):
    on the graph with rounding probes and the kink test (skipped for large graphs, where it would cost
    more than everything else), or on ``stencil(x, deltas)`` -> (n_out, m, nvars) with the rounding bound."""
    eps = np.finfo(np.float64).eps
    K = CENTRAL_CANDIDATES
    if stencil is not None:
        rows = lambda deltas, signs: stencil(x, deltas[..., 0])[..., None]
    else:
        rows = lambda deltas, signs: _stencil(graph, x, deltas[..., 0], jiggle=signs)[..., None]
    pts = {v: np.full(K, x[j]) for j, v in enumerate(graph.variables)} if graph is not None else {}

    def kinks(k, reach):
        with np.errstate(all="ignore"):
            return straddles(graph, pts, k, reach[:, 0], np, np.float64, K)[:, None]
    straddle = kinks if graph is not None and len(graph.variables) * len(graph.nodes) <= STRADDLE_BUDGET else None
    if graph is not None:
        with np.errstate(all="ignore"):
            noise_scale = rounding_scale(graph, {v: x[j] for j, v in enumerate(graph.variables)})
    D1, est, hs, scales = central_candidates(np, x[:, None], rows, eps, probe=stencil is None,
                                             straddle=straddle, noise_scale=noise_scale,
                                             bounded=stencil is not None)
    return D1[..., 0], est[..., 0], hs[..., 0], scales[..., 0]


@quiet
def central(graph: Graph, point: dict) -> NumericResult:
    """Central differences (f(x+h) - f(x-h)) / 2h with h = eps**(1/3) * s, the step that balances
    truncation (h**2) against round-off (eps/h). The scale s is not guessed: every candidate from
    1e-6*min(|x|, 1) to max(|x|, 1) is tried in one evaluation and the one with the smallest error
    estimate wins (truncation from the steps 2h and 4h, round-off as eps*|f|/h)."""
    x = _x_vector(graph, point)
    return _best(*_candidates(graph, x))


def _best(D1, est, hs, scales) -> NumericResult:
    """Per entry, the candidate step with the smallest error estimate."""
    J, err, steps, best = best_central(np, D1, est, hs)
    # the candidates and the pick per entry, for `gradcli explain` (data only: results do not read it)
    res = NumericResult(J, err, steps, detail={"step": steps.tolist(), "candidate_steps": hs,
                                               "candidate_estimates": D1, "candidate_errors": est,
                                               "chosen": best})
    if not np.all(np.isfinite(err)):
        res.status = "unavailable"
        res.message = "no finite-difference stencil fits inside the domain of the function"
        res.jacobian = np.where(np.isfinite(err), J, np.nan)
    return res


@quiet
def central_of(stencil, x: np.ndarray, noise_scale=None) -> NumericResult:
    """:func:`central` for any vector function given as ``stencil(x, deltas) -> (n_out, m, nvars)``;
    ``noise_scale`` (per output) is the size its rounding is relative to, when that is more than |f|."""
    return _best(*_candidates(None, np.asarray(x, dtype=np.float64), stencil, noise_scale))


@quiet
def richardson(graph: Graph, point: dict) -> NumericResult:
    """Ridders' extrapolation of central differences over steps h0, h0/2, h0/4, ...: each column of
    the tableau cancels one more power of h**2; the entry with the smallest change between
    neighbouring orders is the estimate and that change is its error estimate."""
    x = _x_vector(graph, point)
    c = central(graph, point)
    trace: dict = {}
    noise_scale = rounding_scale(graph, {v: x[j] for j, v in enumerate(graph.variables)})
    best, err, hs, h0 = differences.richardson(np, x[:, None], _rows(graph, x), c.jacobian[..., None],
                                               c.error[..., None], c.steps[:, None],
                                               np.finfo(np.float64).eps, trace=trace, noise_scale=noise_scale,
                                               probe=_probe(graph, x))
    best, err, hs, h0 = best[..., 0], err[..., 0], hs[..., 0], h0[..., 0]
    trace["tableau"] = [[col[..., 0] for col in row] for row in trace["tableau"]]
    for key in ("chosen_row", "chosen_column", "stopped_row"):
        trace[key] = trace[key][..., 0]
    res = NumericResult(best, err, hs, detail={"h0": h0.tolist(), "ratio": RIDDERS_CON,
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


@quiet
def complex_step(graph: Graph, point: dict) -> NumericResult:
    """f'(x) = Im f(x + ih) / h: no subtraction, so no cancellation, exact to rounding for any
    small h; only valid where every primitive on the path is holomorphic."""
    blockers = holomorphic_blockers(graph)
    if blockers:
        return NumericResult(None, status="unavailable",
                             message=f"complex step cannot pass through {', '.join(blockers)} "
                                     "(not holomorphic)")
    x = _x_vector(graph, point)
    J, err, h = differences.complex_step(np, x[:, None], _rows(graph, x), COMPLEX_H, 1e-300,
                                         np.finfo(np.float64).eps, probe=_probe(graph, x))
    J, err, h = J[..., 0], err[..., 0], h[..., 0]
    res = NumericResult(J, err, h, detail={"step": h.tolist()})
    if not np.all(np.isfinite(J)):
        res.status = "unavailable"
        res.message = ("no complex step resolves the derivative here: f(x + ih) is not finite, or its "
                       "imaginary part underflows at every step")
    return res
