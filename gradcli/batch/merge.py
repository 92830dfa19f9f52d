"""A batch's statistics from its chunks: each chunk's :class:`Partial`, merged in chunk order.

A partial holds what one chunk contributes and nothing that depends on the chunks before it, so that
chunks can be computed anywhere (this process, a Dask worker) and in any order. :class:`Merge` folds
them in chunk order into exactly what one pass over the points gives: counts and histograms add,
maxima take the larger, the exact median concatenates the relative errors in point order, the worst
points are re-ranked by (badness, index), and every diagnostic keeps the example of its first chunk.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gradcli.batch.report import BatchMethod

#: The histogram behind approximate medians: log10(rel error) from -30 to 10 in bins of 1/40 decade
#: (a median good to about 3%), plus a bin for exact zeros (and anything below 1e-30).
HIST_LO, HIST_HI, HIST_PER_DECADE = -30.0, 10.0, 40
HIST_BINS = int((HIST_HI - HIST_LO) * HIST_PER_DECADE) + 2


@dataclass
class MethodPartial:
    """One method over one chunk: point counts (agreed, mismatched, undefined, unavailable), the
    relative errors of the compared points (``rels``, exact medians) or their histogram (``hist``),
    their maximum, and the chunk's worst candidates as (badness, index, record)."""

    counts: tuple
    rels: np.ndarray | None
    hist: np.ndarray | None
    max_rel: float
    records: list


@dataclass
class Partial:
    """What the points ``start:stop`` contribute. ``reasons``: (kind, op, message) -> (count, first
    example), in the order the chunk met them; ``out``: (points, values, jacobian) when ``--out`` asks."""

    start: int
    stop: int
    methods: dict
    reasons: dict
    undefined: int
    fallback: int
    seconds: dict
    out: tuple | None = None


def method_summary(xp, status, rel, exact: bool) -> dict:
    """What one method contributes to its statistics from a chunk, computed where the chunk's arrays are
    (``xp``) and small but for exact medians: ``counts`` of points by ``status`` (0 agree, 1 mismatch,
    2 undefined, 3 unavailable), the largest relative error ``rel`` of the compared points (``max``), and
    their relative errors (``rels``, NaN where a point is not compared) or their histogram (``hist``)."""
    compared = status <= 1
    summary = {"counts": xp.bincount(status, minlength=4)[:4],
               "max": xp.max(xp.where(compared, rel, -xp.inf))}
    if exact:
        summary["rels"] = xp.where(compared, rel, xp.nan)
    else:
        with np.errstate(all="ignore"):  # log10 of 0, and of the -1 of points not compared
            lg = xp.log10(rel)
            # clipped before the cast: an infinite error belongs to the top bin, and float-to-int of inf
            # is not the same number on every device
            pos = xp.clip((lg - HIST_LO) * HIST_PER_DECADE, -1, HIST_BINS)
            idx = xp.floor(pos).astype(np.int64) + 1
        idx = xp.clip(xp.where(rel < 10 ** HIST_LO, 0, idx), 0, HIST_BINS - 1)
        summary["hist"] = xp.bincount(xp.where(compared, idx, HIST_BINS), minlength=HIST_BINS + 1)[:HIST_BINS]
    return summary


def method_partial(summary: dict, records) -> MethodPartial:
    """The :class:`MethodPartial` of :func:`method_summary`'s arrays, on the host."""
    counts = tuple(int(c) for c in summary["counts"])
    rels = hist = None
    max_rel = -math.inf
    if counts[0] + counts[1]:
        max_rel = float(summary["max"])
        if "rels" in summary:
            rels = summary["rels"][~np.isnan(summary["rels"])]
        else:
            hist = summary["hist"]
    return MethodPartial(counts, rels, hist, max_rel, records)


class _Stats:
    """One method's statistics so far."""

    def __init__(self, name: str, exact: bool, k: int):
        self.m = BatchMethod(name, "ok")
        self.exact, self.k = exact, k
        self.rels: list = []
        self.hist = None if exact else np.zeros(HIST_BINS, dtype=np.int64)
        self.max_rel = -math.inf
        self.worst: list = []  # (badness, index, record)

    def add(self, p: MethodPartial) -> None:
        m = self.m
        m.agreed += p.counts[0]
        m.mismatched += p.counts[1]
        m.undefined += p.counts[2]
        m.unavailable += p.counts[3]
        self.max_rel = max(self.max_rel, p.max_rel)
        if p.rels is not None:
            self.rels.append(p.rels)
        if p.hist is not None:
            self.hist += p.hist
        self.worst = sorted(self.worst + p.records, key=lambda t: (-t[0], t[1]))[:self.k]

    def finish(self) -> BatchMethod:
        m = self.m
        if m.compared:
            m.max_rel_error = self.max_rel
            if self.exact:
                m.median_rel_error = float(np.median(np.concatenate(self.rels)))
            else:
                m.median_rel_error = hist_median(self.hist)
        m.worst = [rec for _, _, rec in self.worst]
        if m.status == "ok":
            if m.mismatched:
                m.status = "mismatch"
            elif not m.compared and m.undefined and not m.unavailable:
                m.status = "undefined"
            elif not m.compared and m.unavailable:
                m.status, m.message = "unavailable", m.message or "no finite estimate at any defined point"
        return m


def hist_median(hist) -> float:
    total = int(hist.sum())
    b = int(np.searchsorted(np.cumsum(hist), (total + 1) // 2))
    if b == 0:
        return 0.0
    if b == hist.size - 1:
        return math.inf
    return 10 ** (HIST_LO + (b - 1 + 0.5) / HIST_PER_DECADE)


@dataclass
class Merge:
    """The partials of ``judged`` methods, added in chunk order (:meth:`add` refuses any other order)."""

    judged: list
    exact: bool
    worst: int
    seconds: dict
    stats: dict = field(init=False)
    reasons: dict = field(default_factory=dict)
    undefined: int = 0
    fallback: int = 0
    done: int = 0

    def __post_init__(self):
        self.stats = {n: _Stats(n, self.exact, self.worst) for n in self.judged}

    def add(self, p: Partial) -> None:
        if p.start != self.done:
            raise ValueError(f"partials are merged in chunk order: expected the chunk at {self.done}, "
                             f"got {p.start}")
        self.done = p.stop
        for key, (count, example) in p.reasons.items():
            c, first = self.reasons.get(key, (0, None))
            self.reasons[key] = (c + count, example if first is None else first)
        self.undefined += p.undefined
        self.fallback += p.fallback
        for name, s in p.seconds.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + s
        for name in self.judged:
            self.stats[name].add(p.methods[name])

    def diagnostics(self) -> list:
        return [{"kind": kind, "op": op, "message": text, "count": count, "example": example}
                for (kind, op, text), (count, example) in sorted(self.reasons.items(), key=lambda kv: -kv[1][0])]

    def worst_overall(self) -> list:
        return sorted((w for s in self.stats.values() for w in s.worst), key=lambda t: (-t[0], t[1]))[:self.worst]
