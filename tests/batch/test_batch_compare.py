"""Batch comparison: every method over arrays of points, statistics, worst points."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import sympy

import gradcli
from gradcli.batch import chunk as bk
from gradcli.batch import compare as bc
from gradcli.batch.points import OutWriter, Sampler, read_points
from gradcli.methods.sym_graph import Unsupported, to_graph
from gradcli.core.graph import evaluate
from gradcli.methods import symbolic
from gradcli.core.parser import parse

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

JUDGED = ("forward", "reverse", "central", "richardson", "complex_step")


def _stats(doc):
    """The document without timings (the only thing allowed to differ between equal runs)."""
    doc = dict(doc)
    for key in ("seconds", "points_per_second", "chunk"):
        doc.pop(key, None)
    doc["methods"] = {k: {kk: vv for kk, vv in m.items() if kk not in ("seconds", "points_per_second")}
                      for k, m in doc["methods"].items()}
    return doc


@pytest.mark.parametrize("expr,domain", [
    ("x**2*sin(y)", "x=-1:1, y=0:2"),
    ("exp(x)*log(y) + atan(x*y)", "x=-2:2, y=0.5:3"),
    ("tanh(x) + sigmoid(y) + softplus(x - y) + erf(x)", "x=-3:3, y=-3:3"),
    ("x*y, x+y, hypot(x, y)", "x=0.1:2, y=-2:2"),
    ("asin(x) + acosh(y) + cbrt(x)", "x=0.1:0.9, y=1.5:4"),
])
def test_smooth_expressions_agree_everywhere(expr, domain):
    r = gradcli.grad_batch(expr, n=4000, domain=domain, seed=1)
    assert r.status == "agree" and r.exit_code == 0, r.message
    assert r.undefined == 0 and r.reference == "symbolic"
    for name in JUDGED:
        m = r.methods[name]
        if m.status == "unavailable":  # complex step through hypot or cbrt
            assert name == "complex_step" and "not holomorphic" in m.message
            continue
        assert m.agree_fraction == 1.0, (name, m.worst[:1])
        assert m.agreed + m.unavailable == 4000 and m.mismatched == 0
        assert m.max_rel_error is not None and m.median_rel_error <= m.max_rel_error
    assert r.methods["forward"].max_rel_error < 1e-10  # relative to |ref|: near a zero of df, more
    assert r.methods["central"].max_rel_error < 1e-3


def test_a_wrong_partial_is_caught_with_its_worst_points(monkeypatch):
    from gradcli.core.primitives import PRIMITIVES

    sin = PRIMITIVES["sin"]
    monkeypatch.setitem(PRIMITIVES, "sin", sin.__class__(**{**sin.__dict__, "partials": (
        lambda F, a, x: F.cos(x) * 1.001,)}))
    x = np.linspace(-1.5, 1.5, 301)
    r = gradcli.grad_batch("sin(x) + y", {"x": x, "y": np.full_like(x, 2.0)})
    assert r.status == "disagree" and r.exit_code == 1
    for name in ("forward", "reverse"):
        m = r.methods[name]
        assert m.status == "mismatch" and m.mismatched == 301 and m.agree_fraction == 0.0
        assert m.max_rel_error == pytest.approx(1e-3, rel=1e-6)
        assert len(m.worst) == 5
        for w in m.worst:
            i = w["index"]
            assert w["point"] == {"x": x[i], "y": 2.0} and w["entry"] == "df/dx"
            assert w["status"] == "mismatch"
            assert w["ref"] == pytest.approx(math.cos(x[i]), rel=1e-13)
            assert w["got"] == pytest.approx(1.001 * math.cos(x[i]), rel=1e-13)
    for name in ("central", "richardson", "complex_step"):
        assert r.methods[name].status == "ok" and r.methods[name].agree_fraction == 1.0
    assert r.worst[0]["method"] in ("forward", "reverse") and r.worst[0]["status"] == "mismatch"
    assert "forward, reverse disagree" in r.message


def test_log_on_a_symmetric_domain_is_half_undefined_and_still_agrees():
    r = gradcli.grad_batch("log(x)", n=4000, domain={"x": (-1, 1)})
    assert 1800 < r.undefined < 2200
    assert r.status == "agree" and r.exit_code == 0
    assert f"{r.undefined} of 4000 points undefined" in r.message
    for name in JUDGED:
        m = r.methods[name]
        assert m.undefined == r.undefined and m.agreed == 4000 - r.undefined and m.agree_fraction == 1.0
    d = r.to_dict()["diagnostics"]
    assert d[0]["op"] == "log" and d[0]["count"] == r.undefined and d[0]["example"]["x"] <= 0


@pytest.mark.parametrize("expr,xs,kind", [
    ("sqrt(x)", [0.0, 0.25, 1.0, 4.0], "undefined"),
    ("abs(x)", [-1.0, 0.0, 0.5, 2.0], "nondifferentiable"),
    ("1/x", [-1.0, 0.0, 0.5, 2.0], "undefined"),
])
def test_a_bad_point_among_good_ones_is_counted_undefined(expr, xs, kind):
    r = gradcli.grad_batch(expr, {"x": np.array(xs)})
    assert r.undefined == 1 and r.status == "agree"
    assert r.methods["forward"].agreed == 3
    assert r.to_dict()["diagnostics"][0]["kind"] == kind


def test_only_undefined_points_exit_3():
    r = gradcli.grad_batch("log(x)", n=100, domain="x=-2:-1")
    assert r.status == "undefined" and r.exit_code == 3 and r.undefined == 100
    assert r.to_dict()["methods"]["forward"]["max_rel_error"] is None


def test_a_kink_spoils_only_its_entries():
    r = gradcli.grad_batch("abs(x) + 3*y", {"x": np.array([0.0, 1.0]), "y": np.array([1.0, 2.0])})
    assert r.undefined == 1 and r.methods["forward"].agreed == 1


def test_results_do_not_depend_on_the_chunk_size():
    kw = dict(n=2000, domain="x=-2:2, y=0.1:3", seed=7)
    docs = [_stats(gradcli.grad_batch("sin(x*y) + log(y) / (1 + x**2)", chunk=c, **kw).to_dict())
            for c in (2000, 333, 64)]
    assert docs[0] == docs[1] == docs[2]


def test_sampling_is_seeded_and_chunk_independent():
    d = {"x": bc_domain(-1, 1), "y": bc_domain(0, 2)}
    a = Sampler(("x", "y"), d, 100, seed=3)
    whole = a.chunk(0, 100)
    b = Sampler(("x", "y"), d, 100, seed=3)
    parts = [b.chunk(0, 30), b.chunk(30, 31), b.chunk(31, 100)]
    for v in ("x", "y"):
        assert np.array_equal(whole[v], np.concatenate([p[v] for p in parts]))
    assert whole["x"].min() >= -1 and whole["x"].max() < 1 and whole["y"].min() >= 0
    assert not np.array_equal(Sampler(("x", "y"), d, 100, seed=4).chunk(0, 100)["x"], whole["x"])


def bc_domain(lo, hi):
    from gradcli.batch.points import Domain

    return Domain(lo, hi)


def test_float32_path():
    r = gradcli.grad_batch("x**2*sin(y) + exp(x/3)", n=3000, domain="x=-1:1, y=0:2", dtype="float32")
    doc = r.to_dict()
    assert doc["dtype"] == "float32" and r.status == "agree", r.message
    for name in JUDGED:
        assert r.methods[name].agree_fraction == 1.0
    # float32 arithmetic shows: errors far above float64's and below the float32 tolerances
    assert 1e-9 < r.methods["complex_step"].max_rel_error < 1e-3
    assert r.methods["complex_step"].median_rel_error < 1e-6
    assert bk.default_tolerance("forward", np.float32)[0] == pytest.approx(3.8e-5, rel=0.1)
    assert bk.default_tolerance("central", np.float32)[0] == pytest.approx(2.2e-3, rel=0.1)
    assert bk.default_tolerance("forward", np.float64) == (1e-10, 0.0)


def test_float32_catches_a_wrong_partial(monkeypatch):
    from gradcli.core.primitives import PRIMITIVES

    exp = PRIMITIVES["exp"]
    monkeypatch.setitem(PRIMITIVES, "exp", exp.__class__(**{**exp.__dict__, "partials": (
        lambda F, a, x: a * 1.01,)}))
    r = gradcli.grad_batch("exp(x)", n=500, domain="x=-1:1", dtype="float32")
    assert r.status == "disagree" and r.methods["forward"].mismatched == 500


def test_the_histogram_median_is_close_to_the_exact_one(monkeypatch):
    kw = dict(n=3000, domain="x=0.1:3", methods=["central", "richardson"])
    exact = gradcli.grad_batch("log(x)*sin(x)", **kw)
    monkeypatch.setattr(bc, "EXACT_MEDIAN_LIMIT", 0)
    approx = gradcli.grad_batch("log(x)*sin(x)", **kw)
    assert exact.median == "exact" and approx.median == "histogram"
    for name in ("central", "richardson"):
        e, a = exact.methods[name].median_rel_error, approx.methods[name].median_rel_error
        assert a == pytest.approx(e, rel=0.06)
        assert approx.methods[name].max_rel_error == exact.methods[name].max_rel_error


def test_without_sympy_the_reference_is_the_consensus(monkeypatch):
    monkeypatch.setattr(bc.symbolic, "derivatives",
                        lambda graph, timeout=None: symbolic.SymbolicResult("unavailable", "timed out"))
    r = gradcli.grad_batch("x**2*sin(y)", n=500, domain="x=-1:1, y=0:2")
    assert r.reference == "consensus" and r.status == "agree"
    assert r.methods["symbolic"].status == "unavailable"
    assert any("consensus" in n for n in r.notes)
    assert r.methods["central"].agree_fraction == 1.0


def test_symbolic_derivatives_become_a_graph_without_lambdify():
    g = parse("atan2(y, x) + max(x, y) + abs(x)**3 + erfc(x) + log(y, 2) + x**y + sqrt(y)/x")
    sym = symbolic.derivatives(g)
    syms = symbolic.symbols_of(g)
    flat = [d for row in sym.derivatives for d in row]
    sg = to_graph(flat, g.variables, syms)
    pts = {"x": np.array([0.7, 1.3, 2.1]), "y": np.array([1.9, 0.4, 3.3])}
    got = evaluate(sg, pts)
    for d, col in zip(flat, got):
        for i in range(3):
            want = float(d.evalf(30, subs={syms["x"]: pts["x"][i], syms["y"]: pts["y"][i]}))
            assert np.broadcast_to(col, (3,))[i] == pytest.approx(want, rel=1e-13)


def test_unsupported_sympy_nodes_are_reported():
    x = sympy.Symbol("x", real=True)
    with pytest.raises(Unsupported):
        to_graph([sympy.gamma(x)], ("x",), {"x": x})
    with pytest.raises(Unsupported):
        to_graph([sympy.Piecewise((x, x > 0), (0, True))], ("x",), {"x": x})


def test_deep_expressions_do_not_recurse():
    expr = "x" + "+sin(x)" * 300
    r = gradcli.grad_batch(expr, n=200, domain="x=-1:1", methods=["forward", "reverse"])
    assert r.status == "agree"


def test_constant_expression():
    r = gradcli.grad_batch("2*pi", n=10)
    assert r.status == "agree" and r.points == 10 and r.variables == []


@pytest.mark.parametrize("ext", [".npz", ".csv"])
def test_out_file_holds_the_compiled_values_and_gradients(tmp_path, ext):
    path = tmp_path / f"g{ext}"
    x = np.array([0.5, 1.0, -1.0, 2.0])
    y = np.array([1.0, 2.0, 3.0, 0.5])
    r = gradcli.grad_batch("x**2*sin(y) + log(x)", {"x": x, "y": y}, out=str(path), chunk=3)
    assert r.undefined == 1 and r.out == str(path)
    assert os.listdir(tmp_path) == [path.name]  # no temporary files left behind
    if ext == ".npz":
        with np.load(path) as z:
            f, gx, gy, pts = z["value"], z["grad_x"], z["grad_y"], z["points"]
            assert list(z["variables"]) == ["x", "y"]
    else:
        header = path.read_text().splitlines()[0]
        assert header == "x,y,f,df/dx,df/dy"
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        pts, f, gx, gy = data[:, :2], data[:, 2], data[:, 3], data[:, 4]
    assert np.array_equal(pts, np.stack([x, y], axis=1))
    ok = x > 0
    assert np.isnan(f[~ok]).all() and np.isnan(gx[~ok]).all()
    x, y, f, gx, gy = x[ok], y[ok], f[ok], gx[ok], gy[ok]
    assert np.allclose(f, x ** 2 * np.sin(y) + np.log(x), rtol=1e-14)
    assert np.allclose(gx, 2 * x * np.sin(y) + 1 / x, rtol=1e-14)
    assert np.allclose(gy, x ** 2 * np.cos(y), rtol=1e-14)
    # what --out wrote reads back as --points
    back = read_points(str(path), ("x", "y"))
    assert np.array_equal(back["x"][ok], x) and np.array_equal(back["y"][ok], y)


@pytest.mark.parametrize("ext", [".npz", ".csv"])
def test_a_failed_write_leaves_the_old_file_alone(tmp_path, monkeypatch, ext):
    path = tmp_path / f"g{ext}"
    path.write_bytes(b"old contents")

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gradcli.batch.points.os.replace", broken)
    with pytest.raises(gradcli.BadInput, match="No space left"):
        gradcli.grad_batch("x**2", n=50, domain="x=0:1", out=str(path))
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == [path.name]


def test_an_interrupted_run_publishes_nothing(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("old")

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gradcli.grad_batch("x**2", n=50, domain="x=0:1", out=str(path), chunk=10, progress=stop)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["g.csv"]


def test_points_files_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=20), rng.normal(size=20)
    np.save(tmp_path / "a.npy", np.stack([x, y], axis=1))
    rec = np.zeros(20, dtype=[("y", "f8"), ("x", "f8")])
    rec["x"], rec["y"] = x, y
    np.save(tmp_path / "b.npy", rec)
    np.savez(tmp_path / "c.npz", x=x, y=y)
    np.savetxt(tmp_path / "d.csv", np.stack([y, x], axis=1), delimiter=",", header="y,x", comments="",
               fmt="%.17g")
    for name in ("a.npy", "b.npy", "c.npz", "d.csv"):
        got = read_points(str(tmp_path / name), ("x", "y"))
        assert np.array_equal(got["x"], x) and np.array_equal(got["y"], y), name


@pytest.mark.parametrize("content,match", [
    ("x,y\n1,2\n3\n", "malformed|columns"),
    ("", "empty"),
    ("1,2\n3,4\n", "header"),
    ("x,z\n1,2\n", "no column for y"),
    ("x,y\n1,nan\n", "not finite"),
    ("x,y\n", "no points"),
    ("x,x\n1,2\n", "once"),
])
def test_bad_csv_points_are_bad_input(tmp_path, content, match):
    p = tmp_path / "p.csv"
    p.write_text(content)
    with pytest.raises(gradcli.BadInput, match=match):
        read_points(str(p), ("x", "y"))


def test_bad_points_files_are_bad_input(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    np.save(tmp_path / "three.npy", np.zeros((4, 3)))
    for name, match in (("bad.npy", "cannot read"), ("three.npy", "shape"), ("nope.npz", "no such file"),
                        ("p.txt", "unknown file type")):
        with pytest.raises(gradcli.BadInput, match=match):
            read_points(str(tmp_path / name), ("x", "y"))


def test_out_writer_rejects_unknown_types(tmp_path):
    with pytest.raises(gradcli.BadInput, match="unknown file type"):
        OutWriter(str(tmp_path / "g.json"), ("x",), 1, 3)
    with pytest.raises(gradcli.BadInput, match="no such folder"):
        OutWriter(str(tmp_path / "missing" / "g.csv"), ("x",), 1, 3)


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0, domain="x=0:1"), "positive"),
    (dict(n=10), "no domain for x"),
    (dict(n=10, domain="x=0:1, z=0:1"), "z: not a variable"),
    (dict(n=10, domain="x=1:0"), "LOW <= HIGH"),
    (dict(n=10, domain="x=0"), "NAME=LOW:HIGH"),
    (dict(n=10, domain="x=0:1", chunk=0), "--chunk"),
    (dict(n=10, domain="x=0:1", dtype="float16"), "dtype"),
    (dict(n=10, domain="x=0:1", device="tpu"), "unknown device"),
    (dict(), "exactly one"),
    (dict(points={"x": [1.0]}, n=3), "exclude"),
    (dict(points={"x": [1.0], "q": [2.0]}), "q is not a variable"),
    (dict(n=10, domain="x=0:1", methods=["fwd"]), "unknown method"),
])
def test_bad_python_input(kwargs, match):
    with pytest.raises(gradcli.BadInput, match=match):
        gradcli.grad_batch("x**2", **kwargs)


def test_richardson_near_a_pole_does_not_claim_digits_it_has_not():
    # y = -1.566 is 5e-3 from tan's pole: the tableau's large steps straddle it; central differences
    # there had no estimate of their own, and that must not let Richardson's luck pass as precision
    import gradcli

    r = gradcli.grad_batch("-(pow(tan(y), min(2, 2)))", n=2000, domain={"y": (-3, 3)}, seed=1)
    assert r.status == "agree", r.to_dict()["methods"]["richardson"]


@pytest.mark.parametrize("expr", ["min(min(2, x), x)", "max(max(z, x), sinh(z))", "tan(y**y)",
                                  "hypot(asin(log10(y)), asin(log10(y)))"])
def test_float32_stencils_that_straddle_a_kink_or_pole_are_not_disagreements(expr):
    # float32 steps are ~5e-3: a kink that close turns a difference quotient into an average of two
    # sides (0.5 for min), which is no derivative; those points are 'unavailable' for the differences
    import gradcli
    from gradcli.core.parser import parse

    g = parse(expr)
    r = gradcli.grad_batch(expr, n=2000, domain={v: (-3, 3) for v in g.variables}, seed=1, dtype="float32")
    assert r.status in ("agree", "undefined"), {k: m["mismatched"] for k, m in r.to_dict()["methods"].items()}


@pytest.mark.parametrize("expr,domain", [
    ("tanh(x)", {"x": (-20, 20)}),  # sympy's 1 - tanh(x)**2 is 0 from |x| = 19 on; forward has 1e-16
    ("sigmoid(x)", {"x": (-750, -700)}),  # its formula overflows to inf/inf
    ("asin(x)", {"x": (0.999999, 0.9999999999)}),  # 1/sqrt(1 - x**2) keeps only ~9 digits there
    ("hypot(x, y) + atan2(y, x)", {"x": (1e200, 1e300), "y": (1e200, 1e300)}),  # x**2 overflows
])
def test_the_formulas_own_rounding_does_not_fail_correct_methods(expr, domain):
    with np.errstate(all="ignore"):
        r = gradcli.grad_batch(expr, n=20_000, domain=domain, seed=3)
    assert r.status == "agree", r.message
    assert r.to_dict()["methods"]["forward"]["mismatched"] == 0


@pytest.mark.parametrize("expr,domain", [("sin(x)", {"x": (1e8, 1e9)}), ("sin(x)", {"x": (1e15, 2e15)}),
                                         ("cos(x)*x", {"x": (1e10, 1e11)})])
def test_steps_spanning_periods_are_unavailable_not_confident(expr, domain):
    # a relative step of 6e-6*|x| spans many periods and can look converged; it must never be a
    # confident wrong number (a false "disagree")
    with np.errstate(all="ignore"):
        r = gradcli.grad_batch(expr, n=5_000, domain=domain, seed=1)
    d = r.to_dict()["methods"]
    assert r.status == "agree", r.message
    assert d["central"]["mismatched"] == 0 and d["richardson"]["mismatched"] == 0


@pytest.mark.parametrize("kw,message", [(dict(seed=-1), "seed"), (dict(seed=None), "seed"), (dict(rtol="1e-3"), "--rtol"),
                                        (dict(worst=0), "worst"), (dict(dtype="bogus"), "dtype")])
def test_grad_batch_bad_options_are_bad_input(kw, message):
    with pytest.raises(gradcli.BadInput, match=message):
        gradcli.grad_batch("x**2", n=10, domain={"x": (-1, 1)}, **kw)


def test_grad_batch_takes_methods_as_the_cli_does():
    r = gradcli.grad_batch("x**2", n=10, domain={"x": (-1, 1)}, methods="forward,central")
    assert set(r.methods) == {"forward", "central"}
