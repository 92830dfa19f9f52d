"""Batch comparison: every method over many points, chunk by chunk, with streaming statistics.

:func:`run_batch` runs sympy once, plans the batch (:class:`~gradcli.batch.chunk.Plan`), computes each
chunk's :class:`~gradcli.batch.merge.Partial` here or on a Dask cluster (:mod:`.distributed`), merges
them in chunk order and words the report. Nothing is kept per point across chunks except the relative
errors for an exact median (only while points x methods fits :data:`EXACT_MEDIAN_LIMIT`; beyond it a
fixed log10 histogram). What one chunk computes, and how, is :mod:`gradcli.batch.chunk`.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from gradcli.core.graph import Graph
from gradcli.methods import numeric, symbolic
from gradcli.verdict.report import METHOD_ORDER
from gradcli.verdict.status import batch_verdict
from gradcli.engines.backend import choose_engine
from gradcli.batch import distributed
from gradcli.batch.arrays import batch_chunk
from gradcli.batch.chunk import Plan, chunk_partial
from gradcli.batch.merge import Merge
from gradcli.batch.options import BatchOptions
from gradcli.batch.report import BatchMethod, BatchReport
from gradcli.methods.sym_graph import Unsupported, to_graph

#: Exact medians keep every relative error: up to this many (points x methods), 80 MB of float64.
EXACT_MEDIAN_LIMIT = 10_000_000


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


def local_partials(plan: Plan, source, chunk: int):
    """The partials of ``source``'s points in chunk order, computed here one at a time."""
    for start in range(0, int(source.n), chunk):
        stop = min(int(source.n), start + chunk)
        yield chunk_partial(plan, source.chunk(start, stop), start, stop)


def run_batch(batch, options: BatchOptions, *, out=None, progress=None, client=None) -> BatchReport:
    """Every selected method over the points of ``batch`` (a :class:`~gradcli.batch.api.PreparedBatch`:
    its ``source`` has ``.n`` points and ``.chunk(a, b)`` -> dict of arrays) -> :class:`BatchReport`.
    ``out`` (an :class:`~gradcli.batch.points.OutWriter`) receives the compiled program's values and
    gradients; ``progress(done, total)`` is called after each chunk; ``client`` (a connected
    ``distributed.Client``) runs the chunks as tasks on its cluster."""
    graph, source = batch.graph, batch.source
    selected = list(options.methods)
    N = int(source.n)
    t_start = time.perf_counter()
    notes: list = []

    sym, sym_graph, sym_msg, sym_seconds = _symbolic(graph, options.timeout)
    reference = "symbolic" if sym_graph is not None else "consensus"
    if sym_graph is None:
        notes.append(f"symbolic unavailable ({sym_msg}): the reference is forward/reverse consensus, "
                     "Richardson where they differ")
    blockers = numeric.holomorphic_blockers(graph)
    judged = [n for n in selected if n != "symbolic" and not (n == "complex_step" and blockers)]
    exact = N * max(len(judged), 1) <= EXACT_MEDIAN_LIMIT
    plan = Plan(graph, sym_graph, replace(options, dask=None), tuple(judged), exact)
    # the engine once for the batch, not per chunk
    plan.options = replace(plan.options, engine=choose_engine(N, len(plan.programs()[0]), options.device,
                                                              options.engine))
    chunk = options.chunk or batch_chunk(plan)
    merged = Merge(judged, exact, options.worst, {name: 0.0 for name in METHOD_ORDER})
    merged.seconds["symbolic"] = sym_seconds

    if client is not None:
        chunks = distributed.partials(client, plan, source, chunk, chunk_partial)
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

    report = BatchReport(batch.expression, list(graph.variables), N, options.device, np.dtype(options.dtype).name,
                         chunk, reference, report_methods, "agree", undefined=merged.undefined,
                         diagnostics=merged.diagnostics(), worst=[rec for _, _, rec in merged.worst_overall()],
                         seconds=total_seconds, median="exact" if exact else "histogram",
                         source=dict(batch.info or {}), symbolic=sym.text if sym.status == "ok" else None,
                         notes=notes, warnings=list(batch.warnings), out=getattr(out, "path", None),
                         reference_fallback=merged.fallback)
    batch_verdict(report)
    return report

