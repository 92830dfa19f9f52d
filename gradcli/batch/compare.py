"""Batch comparison: every method over many points, chunk by chunk, with streaming statistics.

Per chunk: the compiled value-and-gradient program (``reverse``, also what ``--out`` writes), the
compiled |Jacobian| program (the ``scale`` of the tolerances), forward mode on dual arrays (plus two
rounding-jiggled runs for the spread), sympy's derivatives compiled back into a graph (the reference),
central differences, Richardson and complex step, and the elementwise diagnosis of undefined points
and kinks. A chunk is a function of the batch's :class:`Plan` and its range alone
(:func:`chunk_partial`), so it can run here or as a task on a Dask cluster (:mod:`.distributed`); its
:class:`~gradcli.batch.merge.Partial` is merged in chunk order. Nothing is kept per point across chunks
except the relative errors for an exact median (only while points x methods fits
:data:`EXACT_MEDIAN_LIMIT`; beyond it a fixed log10 histogram).

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

from gradcli.verdict.diagnose import diagnose_batch
from gradcli.verdict.point import parse_methods
from gradcli.core.graph import Graph
from gradcli.methods import numeric, symbolic
from gradcli.methods.differences import rounding_scale
from gradcli.methods.forward import monte_carlo_spread
from gradcli.verdict.report import METHOD_ORDER
from gradcli.verdict import tolerance as vt
from gradcli.core.constants import NUMERICAL, TOLERANCES
from gradcli.verdict.status import batch_verdict
from gradcli.verdict.tolerance import batch_floor_share
from gradcli.batch import methods as bm
from gradcli.engines.backend import choose_engine, execute
from gradcli.engines.program import compile_graph
from gradcli.batch import distributed
from gradcli.batch.merge import Merge, Partial, method_partial
from gradcli.batch.report import BatchMethod, BatchReport
from gradcli.methods.sym_graph import Unsupported, to_graph

DEFAULT_CHUNK = 65536
WORST = 5
#: Exact medians keep every relative error: up to this many (points x methods), 80 MB of float64.
EXACT_MEDIAN_LIMIT = 10_000_000


def default_tolerance(name: str, dtype) -> tuple[float, float]:
    """The method's (rtol, atol) for ``dtype``: in float32, the same fraction of the digits."""
    rtol, atol = TOLERANCES[name]
    if np.dtype(dtype) == np.float64 or rtol == 0:
        return rtol, atol
    e64, e = np.finfo(np.float64).eps, np.finfo(dtype).eps
    return float(e ** (math.log(rtol) / math.log(e64))), atol


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _namespace(device: str):
    if device == "cuda":
        import cupy

        return cupy
    return np


def _entry_name(graph: Graph, j: int, k: int) -> str:
    out = f"f{j + 1}" if len(graph.outputs) > 1 else "f"
    return f"d{out}/d{graph.variables[k]}"


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


@dataclass
class Plan:
    """What every chunk of a batch needs, picklable (a Dask task's argument): the expression's graph,
    sympy's derivatives as a graph (None: the consensus reference), the methods and the options. The
    compiled programs are rebuilt from the graph where they are first needed, never shipped."""

    graph: Graph
    sym_graph: Graph | None
    selected: list
    judged: list
    device: str
    dtype: type
    engine: str
    rtol: float | None
    atol: float | None
    worst: int
    exact: bool
    want_out: bool

    def __post_init__(self):
        self._programs = None

    def programs(self):
        """(value-and-gradient program, |Jacobian| program), compiled once per process."""
        if self._programs is None:
            self._programs = compile_graph(self.graph), compile_graph(self.graph, absolute=True)
        return self._programs

    def __getstate__(self):
        return {**self.__dict__, "_programs": None}


def _symbolic(graph: Graph, timeout):
    """sympy's derivatives once, compiled into a graph -> (result, graph or None, why not, seconds)."""
    t0 = time.perf_counter()
    sym = symbolic.derivatives(graph, timeout)
    sym_graph, sym_msg = None, sym.message
    if sym.status == "ok":
        try:
            with symbolic.time_limit(timeout):
                flat = [d for row in sym.derivatives for d in row]
                sym_graph = to_graph(flat, graph.variables, symbolic.symbols_of(graph))
        except Unsupported as exc:
            sym_msg = f"sympy's derivative uses {exc}, which batch mode cannot evaluate"
        except symbolic.SymbolicTimeout:
            sym_msg = f"sympy's derivative could not be compiled within {timeout:g} s"
    return sym, sym_graph, sym_msg, time.perf_counter() - t0


def _example(graph, host_pts, dtype, i: int) -> dict:
    return {v: float(dtype(host_pts[v][i])) for v in graph.variables}


def chunk_partial(plan: Plan, host_pts: dict, start: int, stop: int) -> Partial:
    """The points ``start:stop`` (``host_pts``: their coordinates) judged by every method -> the chunk's
    :class:`~gradcli.batch.merge.Partial`. Depends on nothing but its arguments."""
    graph, sym_graph, selected, dtype, device = plan.graph, plan.sym_graph, plan.selected, plan.dtype, plan.device
    program, program_abs = plan.programs()
    xp = _namespace(device)
    n, m, nv = stop - start, len(graph.outputs), len(graph.variables)
    seconds = {name: 0.0 for name in METHOD_ORDER}
    reasons: dict = {}
    fallback = 0
    inputs = {v: xp.asarray(host_pts[v], dtype=dtype) for v in graph.variables}
    with np.errstate(all="ignore"):
        bad_value, bad_deriv, why = diagnose_batch(graph, inputs, xp, dtype, n=n)
        for key, (count, first) in why.items():
            reasons[key] = (count, _example(graph, host_pts, dtype, first))

        t0 = time.perf_counter()
        R = _rows(xp, execute(program, inputs, device=device, dtype=dtype, engine=plan.engine), n)
        values, Jr = R[:m], R[m:].reshape(m, nv, n)
        seconds["reverse"] += time.perf_counter() - t0
        S = _rows(xp, execute(program_abs, inputs, device=device, dtype=dtype, engine=plan.engine), n)
        scale = S[m:].reshape(m, nv, n)

        t0 = time.perf_counter()
        _, Jf = bm.forward(graph, inputs, xp, dtype, n=n)
        seconds["forward"] += time.perf_counter() - t0
        spread = bm.rounding_spread(graph, inputs, Jf, xp, dtype, n=n)

        results = {"forward": (Jf, None), "reverse": (Jr, None)}
        cen = None
        if "central" in selected or "richardson" in selected or sym_graph is None:
            t0 = time.perf_counter()
            cen = bm.central(graph, inputs, xp, dtype, n=n)
            seconds["central"] += time.perf_counter() - t0
            results["central"] = cen[:2]
        if "richardson" in selected or sym_graph is None:
            t0 = time.perf_counter()
            results["richardson"] = bm.richardson(graph, inputs, xp, dtype, cen, n=n)
            seconds["richardson"] += time.perf_counter() - t0
        if "complex_step" in plan.judged:
            t0 = time.perf_counter()
            results["complex_step"] = bm.complex_step(graph, inputs, xp, dtype, n=n)
            seconds["complex_step"] += time.perf_counter() - t0

        # the reference: sympy's formula where it is finite, forward/reverse consensus elsewhere
        agree_fr = xp.abs(Jf - Jr) <= 1e-2 * default_tolerance("forward", dtype)[0] * \
            xp.maximum(xp.maximum(xp.abs(Jf), xp.abs(Jr)), scale)
        consensus = xp.where(agree_fr, (Jf + Jr) / 2, xp.nan)
        if sym_graph is not None:
            t0 = time.perf_counter()
            # the reference in float64 whatever the batch dtype (then rounded once): a float32
            # evaluation of sympy's formula can be further off than the methods it judges
            wide = {k: xp.asarray(v, dtype=xp.float64) for k, v in inputs.items()}
            ref64 = bm.outputs(sym_graph, wide, xp, np.float64, n)
            # sympy's formula carries its own rounding in float64: 1 - tanh(x)**2 is 0 from |x| = 19
            # on, and 1/sqrt(1 - x**2) near 1 keeps 9 digits. One more ulp per operation measures it,
            # and the first-order bound over its intermediates (and their underflow) bounds it where
            # the random signs happen to cancel
            probe = monte_carlo_spread(
                lambda signs: bm.outputs(sym_graph, wide, xp, np.float64, n, jiggle=lambda i: signs[i, 0]),
                ref64, len(sym_graph.nodes), trials=1, seed=1, xp=xp)
            bound = (float(np.finfo(np.float64).eps) * rounding_scale(sym_graph, wide, xp, n)).reshape(m, nv, n)
            ref_spread = xp.fmax(probe.reshape(m, nv, n), bound).astype(dtype)
            ref = ref64.astype(dtype).reshape(m, nv, n)
            seconds["symbolic"] += time.perf_counter() - t0
            # where the formula is lost to its rounding, or gives 0 because a term of it overflowed
            # or underflowed (x/sqrt(x**2 + y**2) at 1e200) while forward and reverse agree on a number
            # clearly away from 0, those two are the reference
            # (and where a term of the formula overflowed on the way to a finite result, so that no
            # bound exists: 2/(t*exp(250 + 2/t)) at t = 0.00435 is 1.3e-301, not the 0 float64 gives)
            shaky = vt.ill_conditioned(xp, ref, scale, ref_spread) | (xp.isfinite(ref) & ~xp.isfinite(bound))
            lost = (ref == 0) & (xp.abs(consensus) > 1e3 * (spread + float(np.finfo(dtype).eps) * scale))
            fill = (~xp.isfinite(ref) | shaky | lost) & ~bad_deriv & xp.isfinite(consensus)
            spread = xp.where(fill, spread, xp.fmax(spread, xp.nan_to_num(ref_spread)))
            fallback = int(fill.reshape(m * nv, n).any(axis=0).sum()) if m * nv else 0
            ref = xp.where(fill, consensus, ref)
        else:
            ref = xp.where(xp.isfinite(consensus), consensus, results["richardson"][0])
        ill = vt.ill_conditioned(xp, ref, scale, spread)
        ill_points = (ill & ~bad_deriv).reshape(m * nv, n).any(axis=0) if m * nv else xp.zeros(n, dtype=bool)
        count = int(ill_points.sum())
        if count:
            name = np.dtype(dtype).name
            key = ("undefined", name, f"the derivative cannot be computed in {name} (one more ulp of rounding "
                   "per operation moves it by more than 1e-3 of itself: ill-conditioned)")
            c, example = reasons.get(key, (0, None))
            if example is None:
                example = _example(graph, host_pts, dtype, int(_host(xp.argmax(ill_points))))
            reasons[key] = (c + count, example)
        undefined = bad_deriv | ~xp.isfinite(ref) | ill
        undefined_points = int(undefined.reshape(m * nv, n).any(axis=0).sum()) if m * nv else 0
        xs = xp.stack([xp.maximum(xp.abs(inputs[v]), 1) for v in graph.variables]) if nv \
            else xp.ones((0, n), dtype=dtype)
        floor = vt.floor(batch_floor_share(dtype), xp.nan_to_num(values), xs)

        methods = {}
        for name in plan.judged:
            J, est = results[name]
            status, prel, pbad, went, abs_err, tol = _judge(
                xp, name, J, est, ref, undefined, scale, spread, floor, dtype, plan.rtol, plan.atol)
            status_h, prel_h, pbad_h = _host(status), _host(prel), _host(pbad)
            compared = status_h <= 1
            top = _top(pbad_h, compared, plan.worst) if nv else np.zeros(0, dtype=np.int64)
            went_h = _host(went[top]) if top.size else np.zeros(0, dtype=np.int64)
            records = []
            for idx, e in zip(top.tolist(), went_h.tolist()):
                j, k = divmod(int(e), nv) if nv else (0, 0)
                rec = {"method": name, "index": start + idx, "point": _example(graph, host_pts, dtype, idx),
                       "entry": _entry_name(graph, j, k) if nv else "",
                       "got": float(_host(J[j, k, idx])), "ref": float(_host(ref[j, k, idx])),
                       "abs_error": float(_host(abs_err[j, k, idx])), "rel_error": float(prel_h[idx]),
                       "tolerance": float(_host(tol[j, k, idx])),
                       "status": "mismatch" if status_h[idx] == 1 else "ok"}
                records.append((float(pbad_h[idx]), start + idx, rec))
            methods[name] = method_partial(status_h, prel_h[compared], records, plan.exact)

        out = None
        if plan.want_out:
            out = (host_pts, _host(xp.where(bad_value, xp.nan, values)), _host(xp.where(undefined, xp.nan, Jr)))
    return Partial(start, stop, methods, reasons, undefined_points, fallback, seconds, out)


def local_partials(plan: Plan, source, chunk: int):
    """The partials of ``source``'s points in chunk order, computed here one at a time."""
    for start in range(0, int(source.n), chunk):
        stop = min(int(source.n), start + chunk)
        yield chunk_partial(plan, source.chunk(start, stop), start, stop)


def run_batch(graph: Graph, source, *, expression: str = "", methods=None, rtol=None, atol=None,
              timeout: float | None = symbolic.DEFAULT_TIMEOUT, device: str = "cpu", dtype=np.float64,
              chunk: int = DEFAULT_CHUNK, out=None, progress=None, worst: int = WORST, warnings=(),
              source_info: dict | None = None, engine: str = "auto", dask=None) -> BatchReport:
    """Every selected method over the points of ``source`` (``.n`` points, ``.chunk(a, b)`` -> dict of
    arrays) -> :class:`BatchReport`. ``out`` (an :class:`~gradcli.batch.points.OutWriter`) receives the
    compiled program's values and gradients; ``progress(done, total)`` is called after each chunk;
    ``dask`` (a connected ``distributed.Client``) runs the chunks as tasks on its cluster."""
    dtype = np.dtype(dtype).type
    selected = parse_methods(methods)
    N = int(source.n)
    chunk = max(1, int(chunk))
    t_start = time.perf_counter()
    notes: list = []

    sym, sym_graph, sym_msg, sym_seconds = _symbolic(graph, timeout)
    reference = "symbolic" if sym_graph is not None else "consensus"
    if sym_graph is None:
        notes.append(f"symbolic unavailable ({sym_msg}): the reference is forward/reverse consensus, "
                     "Richardson where they differ")
    blockers = numeric.holomorphic_blockers(graph)
    judged = [n for n in selected if n != "symbolic" and not (n == "complex_step" and blockers)]
    exact = N * max(len(judged), 1) <= EXACT_MEDIAN_LIMIT
    plan = Plan(graph, sym_graph, selected, judged, device, dtype, "auto", rtol, atol, worst, exact, out is not None)
    plan.engine = choose_engine(N, len(plan.programs()[0]), device, engine)  # once for the batch, not per chunk
    merged = Merge(judged, exact, worst, {name: 0.0 for name in METHOD_ORDER})
    merged.seconds["symbolic"] = sym_seconds

    if dask is not None:
        chunks = distributed.partials(dask, plan, source, chunk, chunk_partial)
    else:
        chunks = local_partials(plan, source, chunk)
    try:
        for p in chunks:
            merged.add(p)
            if out is not None:
                out.write(*p.out)
            if progress is not None:
                progress(p.stop, N)
    finally:
        chunks.close()  # cancels what is still in flight on a cluster

    total_seconds = time.perf_counter() - t_start
    report_methods: dict = {}
    for name in selected:
        if name == "symbolic":
            sm = BatchMethod("symbolic", "ok" if sym_graph is not None else "unavailable",
                             "" if sym_graph is not None else sym_msg, seconds=merged.seconds["symbolic"],
                             reference=True)
            sm.undefined = merged.undefined
            report_methods[name] = sm
        elif name in merged.stats:
            bmeth = merged.stats[name].finish()
            bmeth.seconds = merged.seconds[name]
            report_methods[name] = bmeth
        else:
            report_methods[name] = BatchMethod(name, "unavailable",
                                               f"complex step cannot pass through {', '.join(blockers)} "
                                               "(not holomorphic)")
    if merged.fallback:
        notes.append(f"at {merged.fallback} point(s) sympy's formula, evaluated in float64, was not finite or "
                     "was lost to its own rounding, overflow or underflow where the gradient is defined: "
                     "forward/reverse consensus was the reference there")

    report = BatchReport(expression, list(graph.variables), N, device, np.dtype(dtype).name, chunk, reference,
                         report_methods, "agree", undefined=merged.undefined, diagnostics=merged.diagnostics(),
                         worst=[rec for _, _, rec in merged.worst_overall()], seconds=total_seconds,
                         median="exact" if exact else "histogram", source=dict(source_info or {}),
                         symbolic=sym.text if sym.status == "ok" else None, notes=notes,
                         warnings=list(warnings), out=getattr(out, "path", None),
                         reference_fallback=merged.fallback)
    batch_verdict(report)
    return report


def _rows(xp, R, n: int):
    """execute's result as (rows, n): a program without variables returns one number per row."""
    R = xp.asarray(R)
    if R.ndim == 1:
        R = R[:, None]
    return xp.broadcast_to(R, (R.shape[0], n))


def _top(badness, mask, k: int) -> np.ndarray:
    """Indices of the k largest badness values among ``mask``, largest first (ties: lowest index)."""
    idx = np.flatnonzero(mask)
    if idx.size > k:
        part = np.argpartition(-badness[idx], k - 1)[:k]
        kth = badness[idx][part].min()
        idx = idx[badness[idx] >= kth]  # keep ties so the choice does not depend on the chunking
    order = np.lexsort((idx, -badness[idx]))
    return idx[order][:k]
