"""Determinism of batch mode: the same expression, domain, seed and N give the same points and the same
statistics whatever the chunk size, the order the chunks are computed in, the process they are computed
in (a pickled plan), and, within the bound docs/batch.md states, the engine."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import gradcli
from gradcli.batch import chunk as bk
from gradcli.batch import compare as bc
from gradcli.batch.merge import Merge
from gradcli.batch.options import BatchOptions
from gradcli.batch.points import Domain, Sampler
from gradcli.core.parser import parse_expression

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EPS = float(np.finfo(np.float64).eps)
#: docs/batch.md: the numba engine's relative errors are within this of the numpy engine's (absolute:
#: the errors are themselves a few eps, and an ulp of the gradient moves them by about one eps)
ENGINE_REL_ERROR_BOUND = 8 * EPS
#: and every other figure that goes through the engine (a gradient, a tolerance) within this, relatively
ENGINE_FIGURE_BOUND = 8 * EPS

# undefined points (sqrt, log below 0), a kink (abs), two variables: every part of the report is exercised
EXPR, DOMAIN = "sqrt(x) + log(y) * x + abs(x - y)", "x=-1:1, y=-1:2"


def _stats(doc):
    """The document without timings and the chunk size (the only things allowed to differ)."""
    doc = {k: v for k, v in doc.items() if k not in ("seconds", "points_per_second", "chunk")}
    doc["methods"] = {k: {kk: vv for kk, vv in m.items() if kk not in ("seconds", "points_per_second")}
                      for k, m in doc["methods"].items()}
    return doc


def _sequential(seed, domains, n):
    """The points one sequential draw gives: numpy's own generators, read in one call each."""
    seeds = np.random.SeedSequence(seed).spawn(len(domains))
    return [np.random.default_rng(s).uniform(lo, hi, n) for s, (lo, hi) in zip(seeds, domains)]


@pytest.mark.parametrize("chunk", [1, 7, 1000, 4096, 65536])
def test_sampler_chunks_are_the_sequential_draws(chunk):
    n = 3000 if chunk < 1000 else 150_000
    ref = _sequential(11, [(-1, 1), (0, 3)], n)
    s = Sampler(("x", "y"), {"x": Domain(-1, 1), "y": Domain(0, 3)}, n, seed=11)
    parts = [s.chunk(a, min(n, a + chunk)) for a in range(0, n, chunk)]
    assert np.array_equal(np.concatenate([p["x"] for p in parts]), ref[0])
    assert np.array_equal(np.concatenate([p["y"] for p in parts]), ref[1])


def test_sampler_chunks_in_any_order_need_no_earlier_chunk():
    n = 50_000
    ref = _sequential(4, [(-2, 5)], n)[0]
    s = Sampler(("t",), {"t": Domain(-2, 5)}, n, seed=4)
    bounds = [(40_000, 50_000), (123, 4567), (0, 1), (4567, 40_000), (1, 123), (17, 18)]
    for a, b in bounds:  # out of order, overlapping, repeated: each is its own slice of the stream
        assert np.array_equal(s.chunk(a, b)["t"], ref[a:b]), (a, b)
    assert s.chunk(10, 10)["t"].size == 0
    with pytest.raises(ValueError):
        s.chunk(10, 5)


def test_statistics_do_not_depend_on_the_chunk_size():
    docs = [gradcli.grad_batch(EXPR, n=20_000, domain=DOMAIN, seed=7, chunk=c).to_dict() for c in (1000, 4096, 65536)]
    # 65536 > N: one chunk, nothing merged; the others merge 20 and 5 chunks
    assert docs[0]["chunk"] == 1000 and docs[2]["chunk"] == 65536
    ref = _stats(docs[2])
    assert ref["undefined"] > 0 and ref["diagnostics"] and ref["worst"], "the case exercises every field"
    for doc in docs[:2]:
        assert _stats(doc) == ref


def test_histogram_statistics_do_not_depend_on_the_chunk_size(monkeypatch):
    monkeypatch.setattr(bc, "EXACT_MEDIAN_LIMIT", 100)
    docs = [_stats(gradcli.grad_batch(EXPR, n=20_000, domain=DOMAIN, seed=2, chunk=c).to_dict())
            for c in (999, 20_000)]
    assert docs[0]["median"] == "histogram" and docs[0] == docs[1]


def _plan(expr, n):
    graph = parse_expression(expr)
    _, sym_graph, _, _ = bc._symbolic(graph, 10)
    options = BatchOptions(engine="numpy")
    judged = tuple(m for m in options.methods if m != "symbolic")
    return bk.Plan(graph, sym_graph, options, judged, n * len(judged) <= bc.EXACT_MEDIAN_LIMIT)


def _same_partial(p, q):
    key = lambda r: (r.start, r.stop, r.reasons, r.undefined, r.fallback)
    assert key(p) == key(q)
    assert p.methods.keys() == q.methods.keys()
    for name in p.methods:
        a, b = p.methods[name], q.methods[name]
        assert (a.counts, a.max_rel, a.records) == (b.counts, b.max_rel, b.records), name
        assert np.array_equal(a.rels, b.rels), name


def test_a_chunk_depends_only_on_its_range_and_survives_pickling():
    n, chunk = 12_000, 2500
    plan = _plan(EXPR, n)
    sampler = Sampler(("x", "y"), {"x": Domain(-1, 1), "y": Domain(-1, 2)}, n, seed=3)
    ranges = [(a, min(n, a + chunk)) for a in range(0, n, chunk)]
    in_order = [bk.chunk_partial(plan, sampler.chunk(a, b), a, b) for a, b in ranges]
    shipped_plan, shipped_sampler = pickle.loads(pickle.dumps((plan, sampler)))
    assert shipped_plan._programs is None  # rebuilt where it runs, never shipped
    backwards = [bk.chunk_partial(shipped_plan, shipped_sampler.chunk(a, b), a, b) for a, b in reversed(ranges)]
    for p, q in zip(in_order, reversed(backwards)):
        _same_partial(p, q)
    assert sum(p.undefined for p in in_order) > 0


def test_the_worst_candidates_break_ties_by_the_lowest_index():
    rng = np.random.default_rng(0)
    for _ in range(300):  # few distinct values: ties at the k-th badness everywhere
        n = int(rng.integers(1, 60))
        k = min(int(rng.integers(1, 8)), n)
        badness = rng.integers(0, 4, n).astype(float)
        badness[rng.random(n) < 0.1] = np.inf
        mask = rng.random(n) < 0.7
        found = bk.top_candidates(np, badness, mask, k)
        found = np.unique(found[mask[found]])
        inside = np.flatnonzero(mask)
        expected = inside[np.lexsort((inside, -badness[inside]))][:k]
        assert found[np.lexsort((found, -badness[found]))][:k].tolist() == expected.tolist()


def test_partials_merge_in_chunk_order_only():
    plan = _plan("x*y", 100)
    sampler = Sampler(("x", "y"), {"x": Domain(0, 1), "y": Domain(0, 1)}, 100)
    merged = Merge(plan.judged, True, 5, {})
    merged.add(bk.chunk_partial(plan, sampler.chunk(0, 50), 0, 50))
    with pytest.raises(ValueError, match="chunk order"):
        merged.add(bk.chunk_partial(plan, sampler.chunk(60, 100), 60, 100))


def _engines(expr, domain, **kw):
    pytest.importorskip("numba")
    return [gradcli.grad_batch(expr, n=20_000, domain=domain, seed=3, chunk=4096, engine=e, **kw).to_dict()
            for e in ("numpy", "numba")]


def _close(a, b, bound):
    return a == b or (a is not None and b is not None and abs(a - b) <= bound * max(abs(a), abs(b)))


@pytest.mark.parametrize("expr,domain", [
    ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", "x=-1:1, y=-1:1"),
    ("tanh(x)*atan2(y, x) + x**y", "x=0.1:3, y=-2:2"),
    (EXPR, DOMAIN),
])
def test_numba_and_numpy_engines_agree_within_the_documented_bound(expr, domain):
    a, b = _engines(expr, domain)
    assert (a["undefined"], a["status"], a.get("diagnostics")) == (b["undefined"], b["status"], b.get("diagnostics"))
    for name, ma in a["methods"].items():
        mb = b["methods"][name]
        for key in ("status", "agreed", "mismatched", "undefined", "unavailable"):
            assert ma.get(key) == mb.get(key), (name, key)
        for key in ("median_rel_error", "max_rel_error"):
            if ma[key] is not None:
                assert abs(ma[key] - mb[key]) <= ENGINE_REL_ERROR_BOUND, (name, key, ma[key], mb[key])
        if name == "reverse":  # the one method the engine computes: its worst points are ranked by rounding
            continue
        assert [w["index"] for w in ma["worst"]] == [w["index"] for w in mb["worst"]], name
        for wa, wb in zip(ma["worst"], mb["worst"]):
            for key in ("got", "ref", "abs_error", "rel_error", "tolerance"):
                assert _close(wa[key], wb[key], ENGINE_FIGURE_BOUND), (name, key, wa[key], wb[key])


def test_where_reverse_is_wrong_both_engines_find_the_same_worst_points(monkeypatch):
    from gradcli.core.primitives import PRIMITIVES

    sin = PRIMITIVES["sin"]
    # an error that grows with x: the worst points are the largest x, far apart from rounding
    monkeypatch.setitem(PRIMITIVES, "sin", sin.__class__(**{**sin.__dict__, "partials": (
        lambda F, a, x: F.cos(x) + 1e-6 * x ** 3,)}))
    a, b = _engines("sin(x) * y", "x=0:1.4, y=1:2", methods="forward,reverse")
    for name in ("forward", "reverse"):
        ma, mb = a["methods"][name], b["methods"][name]
        assert ma["status"] == "mismatch" and ma["mismatched"] == mb["mismatched"] > 10_000
        assert [w["index"] for w in ma["worst"]] == [w["index"] for w in mb["worst"]]
        assert ma["max_rel_error"] > 1e-6
        for key in ("median_rel_error", "max_rel_error"):
            assert abs(ma[key] - mb[key]) <= ENGINE_REL_ERROR_BOUND, (name, key)
