"""One chunk of a batch: every method over the points ``start:stop``, judged, and summarised.

Per chunk: the compiled value-and-gradient program (``reverse``, also what ``--out`` writes), the
compiled |Jacobian| program (the ``scale`` of the tolerances), forward mode on dual arrays (plus two
rounding-jiggled runs for the spread), sympy's derivatives compiled back into a graph (the reference),
central differences, Richardson and complex step, and the elementwise diagnosis of undefined points
and kinks. A chunk is a function of the batch's :class:`Plan` and its range alone
(:func:`chunk_partial`), so it can run here or as a task on a Dask cluster.

The arrays live on the device (:func:`gradcli.batch.arrays.on_device`: numpy on the CPU, CuPy on a GPU)
from the points to the chunk's statistics, which come to the host in one copy
(:class:`~gradcli.batch.arrays.HostCopy`): counts, histograms or relative errors, the worst candidates,
the diagnostics; the only time a chunk waits for its device.

Tolerance per entry (as at one point, :mod:`gradcli.verdict.tolerance`), with the reference evaluated in
float64 (whatever the batch dtype) rather than to 35 digits:
``|got - ref| <= rtol * max(|ref|, scale) + atol + 10 * spread [+ 10 * estimate + floor]``.
In float32 the default rtols keep the same share of the digits: rtol32 = eps32 ** (log rtol64 / log eps64).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from gradcli.core.constants import NUMERICAL, TOLERANCES
from gradcli.core.graph import Graph
from gradcli.engines import cpu
from gradcli.engines.program import compile_graph
from gradcli.methods.differences import rounding_scale
from gradcli.methods.extended_range import EXTENDED
from gradcli.methods.forward import monte_carlo_spread
from gradcli.verdict import tolerance as vt
from gradcli.verdict.diagnose import diagnose_batch
from gradcli.verdict.report import METHOD_ORDER
from gradcli.verdict.tolerance import batch_floor_share
from gradcli.batch import arrays
from gradcli.batch import methods as bm
from gradcli.batch.arrays import Device, HostCopy
from gradcli.batch.merge import Partial, method_partial, method_summary
from gradcli.batch.options import BatchOptions


def default_tolerance(name: str, dtype) -> tuple[float, float]:
    """The method's (rtol, atol) for ``dtype``: in float32, the same fraction of the digits."""
    rtol, atol = TOLERANCES[name]
    if np.dtype(dtype) == np.float64 or rtol == 0:
        return rtol, atol
    e64, e = np.finfo(np.float64).eps, np.finfo(dtype).eps
    return float(e ** (math.log(rtol) / math.log(e64))), atol


@dataclass
class Plan:
    """What every chunk of a batch needs, picklable (a Dask task's argument): the expression's graph,
    sympy's derivatives as a graph (None: the consensus reference), the options (its engine chosen for
    the whole batch; where the chunks run is not theirs to know), the methods judged, and whether the
    medians are exact. The compiled programs are rebuilt from the graph where they are first needed,
    never shipped."""

    graph: Graph
    sym_graph: Graph | None
    options: BatchOptions
    judged: tuple
    exact: bool

    def __post_init__(self):
        self._programs = None

    def programs(self):
        """(value-and-gradient program, |Jacobian| program), compiled once per process."""
        if self._programs is None:
            self._programs = compile_graph(self.graph), compile_graph(self.graph, absolute=True)
        return self._programs

    def __getstate__(self):
        return {**self.__dict__, "_programs": None}


# --- one chunk, step by step ----------------------------------------------------------------------------

@dataclass
class Chunk:
    """A chunk's points on the device and what its steps share."""

    xp: object
    graph: Graph
    dtype: type
    inputs: dict
    n: int
    seconds: dict

    @property
    def shape(self):
        """(outputs, variables, points): a Jacobian's."""
        return len(self.graph.outputs), len(self.graph.variables), self.n

    def any_entry(self, a):
        """Per point: is ``a`` (a Jacobian's shape) set for any entry."""
        m, nv, n = self.shape
        return a.reshape(m * nv, n).any(axis=0) if m * nv else self.xp.zeros(n, dtype=bool)


def chunk_partial(plan: Plan, host_pts: dict, start: int, stop: int) -> Partial:
    """The points ``start:stop`` (``host_pts``: their coordinates) judged by every method -> the chunk's
    :class:`~gradcli.batch.merge.Partial`. Depends on nothing but its arguments."""
    device = arrays.on_device(plan.options.device)
    xp, dtype = device.xp, plan.options.dtype
    c = Chunk(xp, plan.graph, dtype, {v: xp.asarray(host_pts[v], dtype=dtype) for v in plan.graph.variables},
              stop - start, {name: 0.0 for name in METHOD_ORDER})
    with np.errstate(all="ignore"):
        bad_value, bad_deriv, tally = diagnose_batch(c.graph, c.inputs, xp, dtype, n=c.n)
        values, Jr, scale = _kernel(c, plan, device)
        results, spread = _methods(c, plan, Jr)
        ref, spread, fill = _reference(c, plan, scale, results, spread, bad_deriv)
        ill = vt.ill_conditioned(xp, ref, scale, spread)
        undefined = bad_deriv | ~xp.isfinite(ref) | ill
        m, nv, n = c.shape
        xs = xp.stack([xp.maximum(xp.abs(c.inputs[v]), 1) for v in c.graph.variables]) if nv \
            else xp.ones((0, n), dtype=dtype)
        floor = vt.floor(batch_floor_share(dtype), xp.nan_to_num(values), xs)

        copy = HostCopy(xp)
        copy.add("tally", tally.counts)
        ill_points = c.any_entry(ill & ~bad_deriv)
        copy.add("ill", xp.stack([xp.count_nonzero(ill_points), xp.argmax(ill_points)]))
        copy.add("undefined", xp.count_nonzero(c.any_entry(undefined)))
        copy.add("fallback", xp.count_nonzero(c.any_entry(fill)) if fill is not None else xp.zeros((), np.int64))
        for name in plan.judged:
            _summarise_method(c, plan, copy, name, *results[name], ref, undefined, scale, spread, floor)
        if plan.options.out is not None:
            copy.add("values", xp.where(bad_value, xp.nan, values))
            copy.add("jacobian", xp.where(undefined, xp.nan, Jr))
        host = copy.fetch()
    return _partial(plan, c, host_pts, start, stop, tally, host)


def _kernel(c: Chunk, plan: Plan, device: Device):
    """The compiled programs: value and gradient (reverse mode, and ``--out``) and |Jacobian| (the
    tolerances' scale) -> (values (m, N), Jr, scale)."""
    program, program_abs = plan.programs()
    m, nv, n = c.shape
    engine = plan.options.engine
    t0 = time.perf_counter()
    R = _rows(c.xp, device.run(program, c.inputs, c.dtype, engine), n)
    Jr = bm.in_extended_range(c.graph, c.inputs, R[m:].reshape(m, nv, n), c.xp, c.dtype, run_wide=lambda wide, k: _rows(
        np, cpu.execute(program, wide, dtype=EXTENDED), k)[m:].reshape(m, nv, k))
    c.seconds["reverse"] += time.perf_counter() - t0
    S = _rows(c.xp, device.run(program_abs, c.inputs, c.dtype, engine), n)
    return R[:m], Jr, S[m:].reshape(m, nv, n)


def _methods(c: Chunk, plan: Plan, Jr):
    """Forward mode, its rounding spread, and the numerical methods the batch judges (central and
    Richardson also where the reference may need them) -> ({name: (J, estimate or None)}, spread)."""
    xp, graph, dtype, n = c.xp, c.graph, c.dtype, c.n
    selected, consensus = plan.options.methods, plan.sym_graph is None
    t0 = time.perf_counter()
    _, Jf = bm.forward(graph, c.inputs, xp, dtype, n=n)
    c.seconds["forward"] += time.perf_counter() - t0
    spread = bm.rounding_spread(graph, c.inputs, Jf, xp, dtype, n=n)
    results = {"forward": (Jf, None), "reverse": (Jr, None)}
    cen = None
    if "central" in selected or "richardson" in selected or consensus:
        t0 = time.perf_counter()
        cen = bm.central(graph, c.inputs, xp, dtype, n=n)
        c.seconds["central"] += time.perf_counter() - t0
        results["central"] = cen[:2]
    if "richardson" in selected or consensus:
        t0 = time.perf_counter()
        results["richardson"] = bm.richardson(graph, c.inputs, xp, dtype, cen, n=n)
        c.seconds["richardson"] += time.perf_counter() - t0
    if "complex_step" in plan.judged:
        t0 = time.perf_counter()
        results["complex_step"] = bm.complex_step(graph, c.inputs, xp, dtype, n=n)
        c.seconds["complex_step"] += time.perf_counter() - t0
    return results, spread


def _reference(c: Chunk, plan: Plan, scale, results, spread, bad_deriv):
    """The reference: sympy's formula where it is finite, forward/reverse consensus elsewhere ->
    (reference, spread with the formula's own rounding, where consensus stood in or None)."""
    xp, dtype = c.xp, c.dtype
    Jf, Jr = results["forward"][0], results["reverse"][0]
    agree_fr = xp.abs(Jf - Jr) <= 1e-2 * default_tolerance("forward", dtype)[0] * \
        xp.maximum(xp.maximum(xp.abs(Jf), xp.abs(Jr)), scale)
    consensus = xp.where(agree_fr, (Jf + Jr) / 2, xp.nan)
    if plan.sym_graph is None:
        return xp.where(xp.isfinite(consensus), consensus, results["richardson"][0]), spread, None
    t0 = time.perf_counter()
    ref, ref_spread, bound = _formula(c, plan.sym_graph)
    c.seconds["symbolic"] += time.perf_counter() - t0
    # where the formula is lost to its rounding, or gives 0 because a term of it overflowed
    # or underflowed (x/sqrt(x**2 + y**2) at 1e200) while forward and reverse agree on a number
    # clearly away from 0, those two are the reference
    # (and where a term of the formula overflowed on the way to a finite result, so that no
    # bound exists: 2/(t*exp(250 + 2/t)) at t = 0.00435 is 1.3e-301, not the 0 float64 gives)
    shaky = vt.ill_conditioned(xp, ref, scale, ref_spread) | (xp.isfinite(ref) & ~xp.isfinite(bound))
    lost = (ref == 0) & (xp.abs(consensus) > 1e3 * (spread + float(np.finfo(dtype).eps) * scale))
    fill = (~xp.isfinite(ref) | shaky | lost) & ~bad_deriv & xp.isfinite(consensus)
    spread = xp.where(fill, spread, xp.fmax(spread, xp.nan_to_num(ref_spread)))
    return xp.where(fill, consensus, ref), spread, fill


def _formula(c: Chunk, sym_graph: Graph):
    """sympy's formula over the chunk -> (its value in the batch dtype, its rounding, the first-order
    bound on it). Evaluated in float64 whatever the batch dtype (then rounded once): a float32
    evaluation of sympy's formula can be further off than the methods it judges."""
    xp = c.xp
    m, nv, n = c.shape
    wide = {k: xp.asarray(v, dtype=xp.float64) for k, v in c.inputs.items()}
    ref64 = bm.outputs(sym_graph, wide, xp, np.float64, n)
    # sympy's formula carries its own rounding in float64: 1 - tanh(x)**2 is 0 from |x| = 19
    # on, and 1/sqrt(1 - x**2) near 1 keeps 9 digits. One more ulp per operation measures it,
    # and the first-order bound over its intermediates (and their underflow) bounds it where
    # the random signs happen to cancel
    probe = monte_carlo_spread(
        lambda signs: bm.outputs(sym_graph, wide, xp, np.float64, n, jiggle=lambda i: signs[i, 0]),
        ref64, len(sym_graph.nodes), trials=1, seed=1, xp=xp)
    bound = (float(np.finfo(np.float64).eps) * rounding_scale(sym_graph, wide, xp, n)).reshape(m, nv, n)
    ref_spread = xp.fmax(probe.reshape(m, nv, n), bound).astype(c.dtype)
    return ref64.astype(c.dtype).reshape(m, nv, n), ref_spread, bound


def _summarise_method(c: Chunk, plan: Plan, copy: HostCopy, name: str, J, est, ref, undefined, scale, spread,
                      floor) -> None:
    """One method judged over the chunk, its summary and worst candidates added to ``copy``."""
    opts = plan.options
    status, rel, badness, worst_entry, abs_err, tol = _judge(
        c.xp, name, J, est, ref, undefined, scale, spread, floor, c.dtype, opts.rtol, opts.atol)
    for key, a in method_summary(c.xp, status, rel, plan.exact).items():
        copy.add(f"{name}.{key}", a)
    m, nv, n = c.shape
    if not nv:
        return
    xp = c.xp
    top = top_candidates(xp, badness, status <= 1, min(opts.worst, n))
    e = worst_entry[top]
    j, k = e // nv, e % nv
    copy.add(f"{name}.worst", xp.stack([a.astype(xp.float64) for a in (
        top, e, status[top], rel[top], badness[top], J[j, k, top], ref[j, k, top], abs_err[j, k, top],
        tol[j, k, top])]))


def _judge(xp, name, J, est, ref, undefined, scale, spread, floor, dtype, rtol, atol):
    """Per entry: mismatch and unavailable masks, abs error, tolerance -> per-point summaries."""
    abs_err = xp.abs(J - ref)
    numerical = name in NUMERICAL
    tol = vt.tolerance(xp, ref, scale, spread, est, floor, default_tolerance(name, dtype), rtol, atol,
                       numerical, tiny=vt.rounding_tiny(dtype))
    live = ~undefined
    j = vt.judge_entries(xp, J, abs_err, ref, live, tol, est, floor, numerical, default_tol=False)
    # per point, unlike one point's all-or-nothing: an entry without digits is unavailable, the rest judged
    unavailable = j.nonfinite | j.vague if numerical else xp.zeros_like(live)
    judged = live & ~unavailable
    mismatch = judged & j.exceeds
    # as at one point: relative to |ref|, the absolute error where the reference is 0
    den = xp.abs(ref)
    rel = xp.where(den > 0, abs_err / xp.where(den > 0, den, 1), abs_err)
    with np.errstate(all="ignore"):
        badness = xp.where(tol > 0, abs_err / xp.where(tol > 0, tol, 1), xp.where(abs_err > 0, xp.inf, 0))
    badness = xp.where(judged, xp.where(xp.isnan(badness), xp.inf, badness), -1.0)
    rel = xp.where(judged, xp.where(xp.isnan(rel), xp.inf, rel), -1.0)
    m, nv, N = J.shape
    any_ = lambda a: a.reshape(m * nv, N).any(axis=0) if m * nv else xp.zeros(N, dtype=bool)
    status = xp.zeros(N, dtype=np.int8)
    status = xp.where(any_(unavailable), 3, status)
    status = xp.where(any_(undefined), 2, status)
    status = xp.where(any_(mismatch), 1, status).astype(np.int8)
    flat_bad = badness.reshape(m * nv, N)
    worst_entry = flat_bad.argmax(axis=0) if m * nv else xp.zeros(N, dtype=np.int64)
    point_bad = flat_bad.max(axis=0) if m * nv else xp.zeros(N)
    point_rel = rel.reshape(m * nv, N).max(axis=0) if m * nv else xp.zeros(N)
    return status, point_rel, point_bad, worst_entry, abs_err, tol


def top_candidates(xp, badness, mask, k: int):
    """Indices that hold the k points of ``mask`` ranking first by (badness, largest first; index, lowest
    first), found on the device -> 2k indices, unordered, with repeats and points outside ``mask`` among
    them for the host to drop (:func:`_records`). The k largest in no particular order, and the k lowest
    indices at the k-th largest badness: so that which of several equal points is kept does not depend
    on where the chunks are cut."""
    v = xp.where(mask, badness, -xp.inf)
    n = v.shape[0]
    largest = xp.argpartition(v, n - k)[n - k:]
    ties = xp.cumsum(v == v[largest].min())
    first_ties = xp.minimum(xp.searchsorted(ties, xp.arange(1, k + 1)), n - 1)
    return xp.concatenate([largest, first_ties])


# --- on the host ----------------------------------------------------------------------------------------

def _partial(plan: Plan, c: Chunk, host_pts: dict, start: int, stop: int, tally, host: dict) -> Partial:
    """The chunk's :class:`~gradcli.batch.merge.Partial` from what its :class:`HostCopy` brought back."""
    graph, dtype = plan.graph, plan.options.dtype
    reasons = {key: (count, _example(graph, host_pts, dtype, first))
               for key, (count, first) in tally.reasons(host["tally"]).items()}
    ill_count, ill_first = (int(v) for v in host["ill"])
    if ill_count:
        name = np.dtype(dtype).name
        reasons[("undefined", name, f"the derivative cannot be computed in {name} (one more ulp of rounding "
                 "per operation moves it by more than 1e-3 of itself: ill-conditioned)")] = \
            (ill_count, _example(graph, host_pts, dtype, ill_first))
    methods = {}
    for name in plan.judged:
        summary = {key.split(".", 1)[1]: v for key, v in host.items() if key.startswith(name + ".")}
        records = _records(graph, dtype, host_pts, start, name, summary.pop("worst", None), plan.options.worst)
        methods[name] = method_partial(summary, records)
    out = (host_pts, host["values"], host["jacobian"]) if plan.options.out is not None else None
    return Partial(start, stop, methods, reasons, int(host["undefined"]), int(host["fallback"]), c.seconds, out)


def _records(graph: Graph, dtype, host_pts: dict, start: int, name: str, rows, worst: int) -> list:
    """The ``worst`` first of :func:`top_candidates`' points, as (badness, index, record), worst first."""
    if rows is None:
        return []
    top, entry, status, rel, badness, got, ref, abs_err, tol = rows
    keep = np.flatnonzero(status <= 1)
    keep = keep[np.unique(top[keep], return_index=True)[1]]
    keep = keep[np.lexsort((top[keep], -badness[keep]))][:worst]
    nv = len(graph.variables)
    records = []
    for i in keep:
        idx = int(top[i])
        j, k = divmod(int(entry[i]), nv)
        rec = {"method": name, "index": start + idx, "point": _example(graph, host_pts, dtype, idx),
               "entry": _entry_name(graph, j, k), "got": float(got[i]), "ref": float(ref[i]),
               "abs_error": float(abs_err[i]), "rel_error": float(rel[i]), "tolerance": float(tol[i]),
               "status": "mismatch" if status[i] == 1 else "ok"}
        records.append((float(badness[i]), start + idx, rec))
    return records


def _example(graph, host_pts, dtype, i: int) -> dict:
    return {v: float(dtype(host_pts[v][i])) for v in graph.variables}


def _entry_name(graph: Graph, j: int, k: int) -> str:
    out = f"f{j + 1}" if len(graph.outputs) > 1 else "f"
    return f"d{out}/d{graph.variables[k]}"


def _rows(xp, R, n: int):
    """A program's result as (rows, n): a program without variables returns one number per row."""
    R = xp.asarray(R)
    if R.ndim == 1:
        R = R[:, None]
    return xp.broadcast_to(R, (R.shape[0], n))
