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
from gradcli.core.constants import COMPLEX_H, RIDDERS_CON, RIDDERS_ROWS, STRADDLE_BUDGET
from gradcli.methods import differences
from gradcli.methods.differences import best_central, quiet, rounding_scale, select_central

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
    """Stencil rows at one point: deltas (M, n, 1) -> outputs (n_out, M, n, 1) (``idx``, the points to
    evaluate, is this one)."""
    return lambda deltas, idx=None: _stencil(graph, x, deltas[..., 0])[..., None]


def _probe(graph, x):
    """Stencil rows at one point rounded one more ulp per operation: (deltas (M, n, 1), signs) -> outputs."""
    return lambda deltas, signs: _stencil(graph, x, deltas[..., 0], jiggle=signs)[..., None]


def _candidates(graph, x, stencil=None, noise_scale=None):
    """The one step selection (:func:`gradcli.methods.differences.select_central`) at one point (P = 1):
    on the graph with rounding probes and the kink test (skipped for large graphs, where it would cost
    more than everything else), or on ``stencil(x, deltas)`` -> (n_out, m, nvars) with the rounding bound.
    -> (D1, est, hs) over every candidate; those the first pass made unnecessary are nan / inf."""
    eps = np.finfo(np.float64).eps
    if stencil is not None:
        rows = lambda deltas, signs: stencil(x, deltas[..., 0])[..., None]
    else:
        rows = lambda deltas, signs: _stencil(graph, x, deltas[..., 0], jiggle=signs)[..., None]

    def kinks(idx):
        def straddle(k, reach):
            K = reach.shape[0]
            pts = {v: np.full(K, x[j]) for j, v in enumerate(graph.variables)}
            with np.errstate(all="ignore"):
                return straddles(graph, pts, k, reach[:, 0], np, np.float64, K)[:, None]
        return straddle
    small = graph is not None and len(graph.variables) * len(graph.nodes) <= STRADDLE_BUDGET
    if graph is not None and noise_scale is None:
        noise_scale = _noise_scale(graph, x)
    # P = 1: the first pass's points to redo are this point or none, so the rows never need gathering
    D1, est, hs = select_central(np, x[:, None], lambda idx: rows, eps, probe=stencil is None,
                                 straddle_for=kinks if small else None, noise_scale=noise_scale,
                                 bounded=stencil is not None)
    return D1[..., 0], est[..., 0], hs[..., 0]


def _noise_scale(graph: Graph, x: np.ndarray):
    """:func:`gradcli.methods.differences.rounding_scale` at the point ``x`` -> (n_out, 1)."""
    with np.errstate(all="ignore"):
        return rounding_scale(graph, {v: x[j] for j, v in enumerate(graph.variables)})


@quiet
def central(graph: Graph, point: dict, noise_scale=None) -> NumericResult:
    """Central differences (f(x+h) - f(x-h)) / 2h with h = eps**(1/3) * s, the step that balances
    truncation (h**2) against round-off (eps/h). The scale s is not guessed: the natural scale
    max(|x|, 1) first, cross-checked at the smallest, and where that does not settle it every candidate
    from 1e-6*min(|x|, 1) to max(|x|, 1), the one with the smallest error estimate winning (truncation
    from the steps 2h and 4h, round-off as eps*|f|/h). ``noise_scale``: the point's
    :func:`gradcli.methods.differences.rounding_scale`, where the caller has it already."""
    x = _x_vector(graph, point)
    return _best(*_candidates(graph, x, noise_scale=noise_scale))


def _best(D1, est, hs) -> NumericResult:
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
    noise_scale = _noise_scale(graph, x)
    c = central(graph, point, noise_scale)
    trace: dict = {}
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
