"""The one interpreter (graph.walk), the one reverse sweep (graph.sweep_back / graph_sweep) and the one
diagnosis over points (diagnose.diagnose_points): deep graphs, the hooks, and agreement with
independent references (closed-form derivatives, plain loops, the point-by-point diagnosis)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradcli import explain as explain_module
from gradcli.engines.program import compile_graph, run
from gradcli.verdict.diagnose import diagnose, diagnose_batch, diagnose_points
from gradcli.core.graph import GraphBuilder, evaluate, graph_sweep, node_values, walk
from gradcli.methods import forward, reverse
from gradcli.methods.forward import Dual
from gradcli.core.parser import parse
from gradcli.core.primitives import NumericOps

DEPTH = 100_000


def _chain(depth=DEPTH):
    """x -> sin -> sin -> ... (depth times): far deeper than Python's recursion limit."""
    b = GraphBuilder()
    i = b.var("x")
    for _ in range(depth):
        i = b.apply("sin", i)
    return b.build([i])


@pytest.fixture(scope="module")
def chain():
    return _chain()


def _chain_reference(x, depth=DEPTH):
    """Value and derivative of the chain by a plain loop (chain rule by hand)."""
    d = 1.0
    for _ in range(depth):
        d *= math.cos(x)
        x = math.sin(x)
    return x, d


def test_a_100000_node_chain_evaluates_and_differentiates_both_ways(chain):
    value, deriv = _chain_reference(0.7)
    assert evaluate(chain, {"x": np.float64(0.7)})[0] == pytest.approx(value, rel=1e-12)
    vals, J = forward.jacobian(chain, {"x": 0.7})
    assert vals[0] == pytest.approx(value, rel=1e-12) and J[0, 0] == pytest.approx(deriv, rel=1e-9)
    vals, Jr = reverse.jacobian(chain, {"x": 0.7})
    assert vals[0] == pytest.approx(value, rel=1e-12) and Jr[0, 0] == pytest.approx(deriv, rel=1e-9)
    found, bad_value, bad_deriv = diagnose(chain, {"x": 0.7})
    assert found == [] and not bad_value.any() and not bad_deriv.any()


def test_observe_sees_every_node_once_in_order_and_keep_returns_them_all():
    g = parse("x*y + sin(x)")
    seen = []
    outs = walk(g, NumericOps(), {"x": np.float64(1.5), "y": np.float64(0.3)},
                observe=lambda i, v: seen.append((i, v)))
    assert [i for i, _ in seen] == list(range(len(g.nodes)))
    assert outs == [1.5 * 0.3 + math.sin(1.5)]
    kept = walk(g, NumericOps(), {"x": np.float64(1.5), "y": np.float64(0.3)}, keep=True)
    assert kept == [v for _, v in seen] == node_values(g, {"x": 1.5, "y": 0.3})


def test_inputs_may_be_a_function_called_once_per_variable_node_in_node_order():
    g = parse("y*x + x")
    calls = []
    walk(g, NumericOps(), lambda name: calls.append(name) or 2.0)
    assert calls == ["y", "x"]


def test_the_const_and_perturb_hooks_replace_values():
    g = parse("x*3 + 1")
    out = walk(g, NumericOps(), {"x": 2.0}, const=lambda i, c: c.value * 10)
    assert out == [2.0 * 30 + 10]
    # evaluate's jiggle is the perturb hook: every operation one ulp up
    eps = np.finfo(np.float64).eps
    up = evaluate(g, {"x": np.float64(0.1)}, jiggle=lambda i: 1.0)[0]
    assert up == ((0.1 * 3) * (1 + eps) + 1) * (1 + eps)


def test_the_reverse_sweep_gives_every_edge_and_sums_shared_nodes():
    g = parse("x*x*x + sin(x)")  # x is read by three operations
    x = 0.4
    vals = node_values(g, {"x": np.float64(x)})
    partial = reverse.local_partials(g, vals)
    steps = []
    grad = graph_sweep(g, 0, partial, 1.0, observe=lambda i, adj, edges: steps.append((i, adj, edges)))
    assert grad["x"] == pytest.approx(3 * x * x + math.cos(x), rel=1e-15)
    assert [i for i, _, _ in steps] == sorted((i for i, _, _ in steps), reverse=True)
    for _, adj, edges in steps:
        for _, p, c in edges:
            assert c == adj * p
    into_x = [c for _, _, edges in steps for a, _, c in edges if a == g.var_node("x")]
    assert len(into_x) == 4  # x*x twice, (x*x)*x once, sin(x) once
    assert math.fsum(into_x) == pytest.approx(grad["x"], rel=1e-15)


def test_the_compiled_gradient_is_the_same_sweep_as_reverse_mode():
    g = parse("x*y*x + exp(y)*sin(x*y), hypot(x, y)")
    pts = {"x": np.array([0.3, -1.2, 2.5]), "y": np.array([1.1, 0.4, -0.7])}
    R = run(compile_graph(g), pts)
    for n in range(3):
        vals, J = reverse.jacobian(g, {k: v[n] for k, v in pts.items()})
        assert [float(r[n]) for r in R[:2]] == pytest.approx(vals, rel=1e-15)
        assert np.allclose([float(r[n]) for r in R[2:]], J.ravel(), rtol=1e-14, atol=0)


def test_the_tape_and_the_graph_share_the_sweep():
    g = parse("x*y + sin(x)*y")
    xv, yv = reverse.Var(0.8, requires_grad=True), reverse.Var(-0.5, requires_grad=True)
    (out,) = walk(g, reverse.F, {"x": xv, "y": yv})
    gx, gy = reverse.grad(out, [xv, yv])
    _, J = reverse.jacobian(g, {"x": 0.8, "y": -0.5})
    assert (gx, gy) == pytest.approx((J[0, 0], J[0, 1]), rel=1e-15)
    assert gx == pytest.approx(-0.5 + math.cos(0.8) * -0.5, rel=1e-15)


# --- explain observes the sweeps the methods ran ------------------------------------------------------

def test_explain_runs_forward_and_reverse_mode_and_shows_their_numbers(monkeypatch):
    g = parse("x*y + sin(x)*x, exp(y)")
    point = {"x": 1.5, "y": 0.3}
    calls = []
    real_sweep, real_jacobian = forward.sweep, reverse.jacobian
    monkeypatch.setattr(forward, "sweep", lambda *a, **k: calls.append("forward") or real_sweep(*a, **k))
    monkeypatch.setattr(reverse, "jacobian", lambda *a, **k: calls.append("reverse") or real_jacobian(*a, **k))
    ex = explain_module.explain(g, point, tangent={"x": 1.0, "y": 2.0})
    assert calls.count("forward") == 1 and calls.count("reverse") == 1
    _, J = real_jacobian(g, point)
    for sweep in ex.sweeps:
        assert [sweep.gradient[v] for v in g.variables] == list(J[sweep.output])
    seeds = {"x": Dual(np.float64(1.5), np.float64(1.0)), "y": Dual(np.float64(0.3), np.float64(2.0))}
    outs = real_sweep(g, seeds)
    assert ex.directional == [o.tangent for o in outs]
    # against closed forms
    assert ex.directional[0] == pytest.approx(0.3 + math.sin(1.5) + 1.5 * math.cos(1.5) + 2 * 1.5, rel=1e-14)
    assert ex.directional[1] == pytest.approx(2 * math.exp(0.3), rel=1e-14)


# --- one diagnosis over points ------------------------------------------------------------------------

@pytest.mark.parametrize("expr", ["abs(x) + sqrt(y)", "log(x)*y, x/y", "x**y", "max(x, y)*acos(y)", "1/exp(x)"])
def test_the_diagnosis_over_points_is_the_diagnosis_at_each_point(expr):
    g = parse(expr)
    xs = np.array([-2.0, 0.0, 0.5, 1.0, -800.0, 3.0])
    ys = np.array([0.0, 1.0, -1.0, 1.0, 2.0, 3.0])
    columns = {"x": xs, "y": ys}
    bad_value, bad_deriv = diagnose_points(g, {v: columns[v] for v in g.variables})
    for n in range(xs.size):
        point = {v: columns[v][n] for v in g.variables}
        _, bv, bd = diagnose(g, point)
        assert list(bv) == list(bad_value[:, n]) and bd.tolist() == bad_deriv[:, :, n].tolist()


def test_the_batch_counts_its_reasons_by_kind_and_first_point():
    g = parse("sqrt(x) + abs(y)")
    xs, ys = np.array([1.0, -1.0, -2.0, 4.0]), np.array([0.0, 1.0, 0.0, 0.0])
    bad_value, bad_deriv, tally = diagnose_batch(g, {"x": xs, "y": ys}, np, np.float64)
    reasons = tally.reasons(tally.counts)
    assert bad_value[0].tolist() == [False, True, True, False]
    assert reasons[("undefined", "sqrt", "outside the domain of sqrt (x >= 0)")] == (2, 1)
    kinks = [v for (kind, op, _), v in reasons.items() if kind == "nondifferentiable" and op == "abs"]
    assert kinks == [(3, 0)]  # y = 0 at points 0, 2 and 3; point 2's value is already undefined too


def test_wrt_and_overflow_narrow_what_counts():
    g = parse("x**y")
    # d/dy of x**y does not exist for x < 0 (log(x)); d/dx does, when y is held fixed
    _, bad_all = diagnose_points(g, {"x": np.array([-3.0]), "y": np.float64(2.0)}, n=1)
    _, bad_x = diagnose_points(g, {"x": np.array([-3.0]), "y": np.float64(2.0)}, n=1, wrt=["x"])
    assert bad_all.all() and not bad_x.any()
    g = parse("1/exp(x)")
    bad_value, _ = diagnose_points(g, {"x": np.array([1000.0, 0.0])})
    assert bad_value.tolist() == [[True, False]]
    bad_value, _ = diagnose_points(g, {"x": np.array([1000.0, 0.0])}, overflow=False)
    assert not bad_value.any()
