"""The methods of gradcli, vectorised over a chunk of points on an array namespace ``xp``.

Every function takes ``inputs`` (name -> 1-D array of the chunk, in the batch dtype) and returns arrays
shaped ``(outputs, variables, points)`` for Jacobians and ``(outputs, points)`` for values, so memory
is a small multiple of the chunk: never of the whole batch.

The numerical methods are :mod:`gradcli.methods.differences`, the same as at one point: they only
evaluate the graph, with every perturbed copy of a variable stacked on a leading axis so one evaluation
serves a whole stencil.
"""
from __future__ import annotations

import numpy as np

from gradcli.core.constants import COMPLEX_STEP, STRADDLE_BUDGET
from gradcli.core.graph import Graph, evaluate
from gradcli.methods import differences, extended_range
from gradcli.methods.differences import best_central, rounding_scale, select_central, straddles
from gradcli.methods.forward import Dual, DualOps, monte_carlo_spread, sweep, watched_ops


def _n_points(inputs: dict, n: int | None) -> int:
    return n if n is not None else (len(next(iter(inputs.values()))) if inputs else 1)


def outputs(graph: Graph, inputs: dict, xp, dtype, n: int | None = None, jiggle=None) -> object:
    """The outputs of ``graph`` at the chunk -> array (len(graph.outputs), points); ``jiggle`` as
    :func:`gradcli.core.graph.evaluate`'s."""
    N = _n_points(inputs, n)
    outs = evaluate(graph, inputs, xp=xp, dtype=dtype, jiggle=jiggle)
    out = xp.empty((len(outs), N), dtype=dtype)
    for j, o in enumerate(outs):
        out[j] = xp.broadcast_to(xp.asarray(o, dtype=dtype), (N,))
    return out


# --- forward mode on dual arrays ---------------------------------------------------------------------

def forward(graph: Graph, inputs: dict, xp, dtype, jiggle=None, n: int | None = None, observe=None):
    """Values (m, N) and Jacobian (m, nvars, N) by dual numbers whose tangents are arrays (nvars, N).

    Each variable is seeded with a column of the identity, shape (nvars, 1), that broadcasts against
    the points. ``jiggle`` (signs, shape (nodes, 2)) adds one ulp of rounding per operation, as in
    :func:`gradcli.methods.forward.jacobian`, to measure the rounding spread.
    """
    N = _n_points(inputs, n)
    nv = len(graph.variables)
    eye = xp.eye(nv, dtype=dtype)
    seeds = {v: Dual(inputs[v], eye[:, k:k + 1]) for k, v in enumerate(graph.variables)}
    ops = DualOps(xp) if observe is None else watched_ops(observe, xp)
    outs = sweep(graph, seeds, ops, dtype=dtype, jiggle=jiggle,
                 observe=None if observe is None else (lambda i, d: observe.see(d)))
    m = len(graph.outputs)
    V = xp.empty((m, N), dtype=dtype)
    J = xp.zeros((m, nv, N), dtype=dtype)
    for j, d in enumerate(outs):
        v, t = (d.value, d.tangent) if isinstance(d, Dual) else (d, None)
        V[j] = xp.broadcast_to(xp.asarray(v, dtype=dtype), (N,))
        if t is not None and nv:
            J[j] = xp.broadcast_to(xp.asarray(t, dtype=dtype), (nv, N))
    if observe is not None:  # the extended run itself
        return V, J
    return V, in_extended_range(graph, inputs, J, xp, dtype, jiggle)


def rounding_spread(graph: Graph, inputs: dict, J0, xp, dtype, seed: int = 0, n: int | None = None):
    """How far one extra ulp of rounding per operation moves forward mode's Jacobian (two runs with
    random directions per node, as :func:`gradcli.methods.forward.rounding_spread` does at a point)."""
    return monte_carlo_spread(lambda signs: forward(graph, inputs, xp, dtype, jiggle=signs, n=n)[1], J0,
                              len(graph.nodes), trials=2, seed=seed, xp=xp)


def in_extended_range(graph: Graph, inputs: dict, J, xp, dtype, jiggle=None, run_wide=None):
    """``J`` (m, nvars, N) with the entries float64's range lost recomputed at their points on the host in
    the extended type (:mod:`gradcli.methods.extended_range`): candidates are entries 0, subnormal or not
    finite where the output depends on the variable; forward mode redone wider (``jiggle`` as given)
    says at which of them an intermediate left float64's range, and there ``run_wide(wide inputs, k)``
    (default: that forward run) gives the entry. Only the gathered points travel; float32 batches and
    platforms without a wider type keep ``J``, and so does a device (CuPy): the host's long double is not
    there, and the gathering would wait for the device at every chunk (docs/methods.md, "When float64
    is the problem")."""
    if xp is not np or np.dtype(dtype) != np.float64 or extended_range.EXTENDED is None or J.size == 0:
        return J
    m, nv, N = J.shape
    reach = np.asarray([[graph.depends_on([v])[o] for v in graph.variables] for o in graph.outputs],
                       dtype=bool).reshape(m, nv, 1)
    idx = np.nonzero((extended_range.suspect(np, J) & reach).reshape(m * nv, N).any(axis=0))[0]
    if idx.size == 0:
        return J
    k = int(idx.size)
    wide = extended_range.widened({key: v[idx] if np.ndim(v) else v for key, v in inputs.items()})
    watch = extended_range.Watch(k)
    with np.errstate(all="ignore"):
        try:
            J_wide = forward(graph, wide, np, extended_range.EXTENDED, jiggle, k, observe=watch)[1]
            if run_wide is not None:
                J_wide = run_wide(wide, k)
        except (TypeError, ValueError, OverflowError):  # a primitive with no long double loop
            return J
    J = J.copy()
    J[:, :, idx] = extended_range.repaired(J[:, :, idx], J_wide, reach & watch.where)
    return J


# --- finite differences, vectorised --------------------------------------------------------------------

def _perturbed(graph, inputs, k, deltas, xp, dtype, N, jiggle=None):
    """Outputs with variable k moved by each row of ``deltas`` (P, N) -> array (m, P, N)."""
    name = graph.variables[k]
    moved = dict(inputs)
    moved[name] = inputs[name][None, :] + deltas
    outs = evaluate(graph, moved, xp=xp, dtype=dtype, jiggle=jiggle)
    P = deltas.shape[0]
    return xp.stack([xp.broadcast_to(xp.asarray(o), (P, N)) for o in outs])


#: Points per block of the differences on the CPU: a stencil stacks its rows of every value, and at 4096
#: points a row-stack of one node (2.5 MB for central's 78 rows) stays in cache; a chunk's whole stack
#: would not. Every operation is elementwise, so the blocks give the chunk's bits. A GPU takes the chunk
#: whole: there a block is a kernel launch per operation, and memory is the device's.
CENTRAL_BLOCK = 4096


def _in_blocks(xp, method, inputs: dict, N: int, per_point=()):
    """``method(inputs, *per_point, n)`` over blocks of :data:`CENTRAL_BLOCK` points (on numpy; the whole
    chunk elsewhere), its arrays joined along the points axis. ``per_point``: arrays whose last axis is
    the points, cut with the inputs."""
    if xp is not np or N <= CENTRAL_BLOCK:
        return method(inputs, *per_point, N)
    parts = []
    for s in range(0, N, CENTRAL_BLOCK):
        block = slice(s, s + CENTRAL_BLOCK)
        at, P = _subset(inputs, block, N)
        parts.append(method(at, *(p[..., block] for p in per_point), P))
    return tuple(xp.concatenate([p[i] for p in parts], axis=-1) for i in range(len(parts[0])))


def central(graph: Graph, inputs: dict, xp, dtype, n: int | None = None):
    """Central differences with error estimates -> (J, estimate, the chosen steps (nvars, N)), block by
    block of :data:`CENTRAL_BLOCK` points (see :func:`_central_block`)."""
    return _in_blocks(xp, lambda at, P: _central_block(graph, at, xp, dtype, P), inputs, _n_points(inputs, n))


def _central_block(graph: Graph, inputs: dict, xp, dtype, n: int | None = None):
    """Central differences with error estimates -> (J, estimate, the chosen steps (nvars, N)).

    The one step selection of :func:`gradcli.methods.differences.select_central`, as at one point: the
    first pass at the natural step, cross-checked at the smallest, and every candidate scale from
    1e-6*min(|x|, 1) to max(|x|, 1) (steps h, 2h, 4h each, rounding probes and the kink test) only for the
    points the first pass leaves unsure; so a point of a batch gets the estimate ``grad --at`` gives there.
    """
    N = _n_points(inputs, n)
    m, nv = len(graph.outputs), len(graph.variables)
    if not nv:  # a constant expression: nothing to perturb
        zero = xp.zeros((m, 0, N), dtype=dtype)
        return zero, zero, xp.ones((0, N), dtype=dtype)
    eps = np.finfo(dtype).eps
    # graph.evaluate's rounding signs are in float64 ulps: scaled to one ulp of dtype, kept in dtype
    ulp = float(eps / np.finfo(np.float64).eps)
    x = _points(graph, inputs, xp, dtype, N)
    check_kinks = nv * len(graph.nodes) <= STRADDLE_BUDGET
    scale = rounding_scale(graph, {v: x[k] for k, v in enumerate(graph.variables)}, xp, N)
    parts = []
    # one variable at a time (every step is per variable and elementwise): memory stays K * 6 rows of the
    # chunk, not K * 6 * nvars
    for k in range(nv):
        def rows_for(idx, k=k):
            at, P = _subset(inputs, idx, N)

            def rows(deltas, signs):
                jig = None if signs is None else (lambda i: (ulp * signs(i))[:, None])
                return _perturbed(graph, at, k, deltas[:, 0], xp, dtype, P, jiggle=jig)[:, :, None]
            return rows

        def straddle_for(idx, k=k):
            at, P = _subset(inputs, idx, N)

            def straddle(_, reach):
                K = reach.shape[0]
                tiled = {v: xp.broadcast_to(xp.asarray(at[v])[None], (K, P)).ravel() for v in graph.variables}
                return straddles(graph, tiled, k, reach.ravel(), xp, dtype, K * P).reshape(K, P)
            return straddle
        D1, est, hs = select_central(xp, x[k:k + 1], rows_for, eps, probe=True,
                                     straddle_for=straddle_for if check_kinks else None, noise_scale=scale)
        parts.append(best_central(xp, D1, est, hs)[:3])
    J, err, steps = (xp.concatenate([p[i] for p in parts], axis=1 if i < 2 else 0) for i in range(3))
    J = xp.where(xp.isfinite(err), J, xp.nan)
    return J, err, steps


def _subset(inputs: dict, idx, N: int):
    """The chunk's inputs at the points ``idx`` (indices or a slice; None: all of them) -> (inputs, number
    of points). Inputs that are not per point (constants, scalars) stay as they are."""
    if idx is None:
        return inputs, N
    cut = lambda a: a[idx] if getattr(a, "ndim", 0) and a.shape[0] == N else a
    n = len(range(N)[idx]) if isinstance(idx, slice) else int(idx.shape[0])
    return {v: cut(a) for v, a in inputs.items()}, n


def _rows(graph: Graph, inputs: dict, xp, dtype, N: int, jiggle=None):
    """Stencil rows over the chunk: deltas (M, nvars, N) -> outputs (m, M, nvars, N), one variable moved
    at a time (by its column of deltas) with the others at their points."""
    nv = len(graph.variables)
    return lambda deltas: xp.stack([_perturbed(graph, inputs, k, deltas[:, k], xp, dtype, N, jiggle=jiggle)
                                    for k in range(nv)], axis=2)


def _points(graph: Graph, inputs: dict, xp, dtype, N: int):
    """The chunk as one array (nvars, N)."""
    return xp.stack([xp.broadcast_to(xp.asarray(inputs[v], dtype=dtype), (N,)) for v in graph.variables])


def richardson(graph: Graph, inputs: dict, xp, dtype, central_result, n: int | None = None):
    """Ridders' extrapolation over steps h0, h0/2, ... from the step central differences chose, as at
    one point (:func:`gradcli.methods.differences.richardson`) -> (J, estimate), block by block of
    :data:`CENTRAL_BLOCK` points as central differences."""
    N = _n_points(inputs, n)
    m, nv = len(graph.outputs), len(graph.variables)
    if not nv:
        return xp.zeros((m, 0, N), dtype=dtype), xp.zeros((m, 0, N), dtype=dtype)
    return _in_blocks(xp, lambda at, Jc, Ec, steps, P: _richardson_block(graph, at, xp, dtype, (Jc, Ec, steps), P),
                      inputs, N, per_point=central_result)


def _richardson_block(graph: Graph, inputs: dict, xp, dtype, central_result, N: int):
    eps = np.finfo(dtype).eps
    Jc, Ec, steps = central_result
    x = _points(graph, inputs, xp, dtype, N)
    scale = rounding_scale(graph, {v: x[k] for k, v in enumerate(graph.variables)}, xp, N)
    parts = []
    ulp = float(eps / np.finfo(np.float64).eps)  # as central differences' probes
    for k in range(len(graph.variables)):  # one variable at a time, as central differences
        def rows(deltas, signs=None, idx=None, k=k):
            jig = None if signs is None else (lambda i: (ulp * signs(i))[:, None])
            at, P = _subset(inputs, idx, N)
            return _perturbed(graph, at, k, deltas[:, 0], xp, dtype, P, jiggle=jig)[:, :, None]
        parts.append(differences.richardson(xp, x[k:k + 1], rows, Jc[:, k:k + 1], Ec[:, k:k + 1],
                                            steps[k:k + 1], eps, noise_scale=scale, probe=rows, gather=True)[:2])
    return xp.concatenate([p[0] for p in parts], axis=1), xp.concatenate([p[1] for p in parts], axis=1)


def complex_step(graph: Graph, inputs: dict, xp, dtype, n: int | None = None):
    """Im f(x + ih) / h at three steps, as at one point (:func:`gradcli.methods.differences.complex_step`)
    -> (J, estimate), block by block of :data:`CENTRAL_BLOCK` points. The caller checks the path is
    holomorphic."""
    N = _n_points(inputs, n)
    m, nv = len(graph.outputs), len(graph.variables)
    if not nv:
        return xp.zeros((m, 0, N), dtype=dtype), xp.zeros((m, 0, N), dtype=dtype)
    return _in_blocks(xp, lambda at, P: _complex_step_block(graph, at, xp, dtype, P), inputs, N)


def _complex_step_block(graph: Graph, inputs: dict, xp, dtype, N: int):
    rel, tiny = COMPLEX_STEP[np.dtype(dtype)]
    ctype = np.result_type(dtype, np.complex64)
    rows = _rows(graph, inputs, xp, dtype, N)
    ulp = float(np.finfo(dtype).eps / np.finfo(np.float64).eps)  # as central differences' probes

    def probe(deltas, signs):
        return _rows(graph, inputs, xp, dtype, N, jiggle=lambda i: (ulp * signs(i))[:, None])(deltas.astype(ctype))
    J, err, _ = differences.complex_step(xp, _points(graph, inputs, xp, dtype, N),
                                         lambda deltas: rows(deltas.astype(ctype)), dtype(rel), dtype(tiny),
                                         np.finfo(dtype).eps, probe=probe)
    return J.astype(dtype), err.astype(dtype)
