"""``gradcli explain`` (gradcli/explain.py, render/explain.py, cli/explain.py): the content of each
section, the cap, and that --json carries what the table shows."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gradcli.cli import main
from gradcli.explain import CAP, HEAD, TAIL, Gap, explain
from gradcli.core.graph import node_values
from gradcli.methods import differences, forward, numeric, tableau
from gradcli.core.constants import CENTRAL_CANDIDATES
from gradcli.core.parser import parse
from gradcli.render.explain import accumulation, num
from gradcli.render.table import fmt_error
from cli_helpers import PLAIN_ENV, RUNNER, strict_json


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EXPR = "x*y + sin(x)"
POINT = {"x": 1.5, "y": 0.3}
BIG = " + ".join(f"sin(x*{k})" for k in range(1, 68))  # 3 nodes per term, over 200 in all


def run(*args):
    result = RUNNER.invoke(main, ["explain", *args], env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


@pytest.fixture(scope="module")
def ex():
    return explain(parse(EXPR), POINT, expression=EXPR)


# --- the engine ------------------------------------------------------------------------------------

def test_the_tree_expands_x_once_and_refers_to_it_after(ex):
    g = parse(EXPR)
    x = g.var_node("x")
    rows = [r for r in ex.tree if r.node == x]
    assert [r.kind for r in rows] == ["node", "shared"]
    assert rows[0].uses == 2 and "↑ v0 = x (shared)" == rows[1].text
    # every node appears expanded exactly once
    assert sorted(r.node for r in ex.tree if r.kind == "node") == list(range(len(g.nodes)))
    assert ex.tree_omitted == 0


def test_the_reverse_sweep_sums_xs_two_contributions(ex):
    (sweep,) = ex.sweeps
    x = parse(EXPR).var_node("x")
    (row,) = [r for r in sweep.rows if r.node == x]
    contributions = sorted(s["contribution"] for s in row.sources)
    assert len(contributions) == 2
    # cos(1.5) is numpy's here and the libm's in math.cos: on some CPUs an ulp apart, so to 4 ulp
    ulps = 4 * np.finfo(np.float64).eps
    assert contributions == pytest.approx(sorted([POINT["y"], math.cos(POINT["x"])]), rel=ulps, abs=0)
    assert row.adjoint == contributions[0] + contributions[1] == sweep.gradient["x"]
    assert row.adjoint == pytest.approx(POINT["y"] + math.cos(POINT["x"]), rel=ulps, abs=0)
    assert sweep.gradient["y"] == POINT["x"]
    text = accumulation(row)
    assert text.startswith("v0.adjoint = ") and text.count("(from v") == 2 and text.endswith(num(row.adjoint))
    # every edge's contribution is its node's adjoint times the local partial
    for r in sweep.rows:
        for e in r.edges:
            assert e.contribution == r.adjoint * e.partial


def test_the_wengert_list_values_are_node_values(ex):
    g = parse(EXPR)
    vals = node_values(g, {k: np.float64(v) for k, v in POINT.items()})
    assert [s.value for s in ex.wengert] == [float(v) for v in vals]
    assert [s.text for s in ex.wengert] == ["x", "y", "v0 * v1", "sin(v0)", "v2 + v3"]


def test_the_default_tangent_is_the_first_variable_and_gives_the_directional_derivative(ex):
    g = parse(EXPR)
    _, J = forward.jacobian(g, POINT)
    assert ex.tangent == {"x": 1.0, "y": 0.0}
    assert ex.directional[0] == pytest.approx(J[0, 0], rel=1e-15)
    other = explain(g, POINT, tangent={"y": 2.0})
    assert other.directional[0] == pytest.approx(2 * J[0, 1], rel=1e-15)
    assert explain(g, POINT, tangent=[1.0, -1.0]).directional[0] == pytest.approx(J[0, 0] - J[0, 1], rel=1e-15)


def test_richardson_tableau_chosen_entry_is_richardsons_result(ex):
    g = parse(EXPR)
    r = numeric.richardson(g, POINT)
    for e in ex.richardson["entries"]:
        k = g.variables.index(e.variable)
        row = next(row for row in e.rows if row["row"] == e.chosen_row)
        assert row["columns"][e.chosen_column] == r.jacobian[0, k] == e.estimate
        assert [row["h"] for row in e.rows] == list(r.steps[:len(e.rows), k])


def test_central_entry_is_the_chosen_candidate(ex):
    g = parse(EXPR)
    c = numeric.central(g, POINT)
    for e in ex.central["entries"]:
        k = g.variables.index(e.variable)
        tried = [cand["index"] for cand in e.candidates]
        # the first pass's two candidates, or every one of them
        assert tried in ([0, CENTRAL_CANDIDATES - 1], list(range(CENTRAL_CANDIDATES)))
        assert e.estimate == c.jacobian[0, k] == e.candidates[e.chosen]["estimate"]
        assert e.error == c.error[0, k]
        assert e.error == min(cand["error"] for cand in e.candidates)


def test_the_numeric_trace_does_not_change_the_results():
    g = parse("exp(x)*cos(y)")
    p = {"x": 0.4, "y": 2.0}
    traced = {}
    r = numeric.richardson(g, p)
    x = np.array([0.4, 2.0])
    hs = r.steps
    Fv = numeric._stencil(g, x, np.stack([s * h for h in hs for s in (1.0, -1.0)]))
    D = [(Fv[:, 2 * k] - Fv[:, 2 * k + 1]) / (2 * hs[k]) for k in range(len(hs))]
    a = tableau.ridders(lambda i: D[i], len(hs), D[0].shape)
    b = tableau.ridders(lambda i: D[i], len(hs), D[0].shape, trace=traced)
    assert all(np.array_equal(u, v) for u, v in zip(a, b)) and traced["tableau"]


def test_vector_valued_expressions_get_one_sweep_per_output():
    g = parse("x*y, x+y")
    ex = explain(g, {"x": 1.0, "y": 2.0})
    assert [s.output for s in ex.sweeps] == [0, 1]
    assert ex.sweeps[0].gradient == {"x": 2.0, "y": 1.0} and ex.sweeps[1].gradient == {"x": 1.0, "y": 1.0}
    assert len(ex.central["entries"]) == 4
    doc = ex.to_dict()
    assert [r["output"] for r in doc["reverse"]] == [0, 1]
    assert doc["value"] == [2.0, 3.0] and doc["directional_derivative"] == [2.0, 1.0]
    assert doc["symbolic"]["derivatives"] == [{"x": "y", "y": "x"}, {"x": "1", "y": "1"}]


def test_a_large_expression_is_capped_and_says_so():
    g = parse(BIG)
    assert len(g.nodes) > 200
    ex = explain(g, {"x": 0.5})
    assert ex.capped and ex.notes and "--all" in ex.notes[0]
    gaps = [s for s in ex.wengert if isinstance(s, Gap)]
    assert len(gaps) == 1 and gaps[0].gap == len(g.nodes) - HEAD - TAIL
    assert len(ex.wengert) == HEAD + TAIL + 1
    assert any(isinstance(r, Gap) for r in ex.sweeps[0].rows)
    assert ex.tree_omitted > 0 and len(ex.tree) <= 70
    full = explain(g, {"x": 0.5}, cap=None)
    assert not full.capped and len(full.wengert) == len(g.nodes) and full.tree_omitted == 0


# --- the command -----------------------------------------------------------------------------------

def test_cli_shows_every_section():
    r = run(EXPR, "--at", "x=1.5, y=0.3")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    out = r.stdout
    for heading in ("The graph", "Wengert list", "Reverse mode", "Symbolic", "Central differences", "Richardson"):
        assert heading in out
    assert "↑ v0 = x (shared)" in out and "v0.adjoint = " in out and "y + cos(x)" in out


def test_cli_json_is_strict_and_carries_what_the_table_shows():
    r = run(EXPR, "--at", "x=1.5, y=0.3", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    text = run(EXPR, "--at", "x=1.5, y=0.3").stdout
    for row in doc["tree"]:
        assert row["text"] in text
    for s in doc["wengert"]:
        assert s["label"] in text and s["text"] in text
        assert num(s["value"]) in text and num(s["tangent"]) in text
    for sweep in doc["reverse"]:
        for row in sweep["rows"]:
            assert num(row["adjoint"]) in text
            for e in row["edges"]:
                assert num(e["partial"]) in text and num(e["contribution"]) in text
        for g in sweep["gradient"].values():
            assert num(g) in text
    for v, d in doc["symbolic"]["derivatives"].items():
        assert f"∂f/∂{v} = {d}" in text
    for e in doc["central"]["entries"]:
        assert num(e["step"]) in text and fmt_error(e["error"]) in text
        for c in e["candidates"]:
            assert num(c["h"]) in text
    for e in doc["richardson"]["entries"]:
        assert f"row {e['chosen_row']}, column {e['chosen_column']}" in text
        for row in e["rows"]:
            assert num(row["h"]) in text
    assert doc["directional_derivative"] == pytest.approx(0.3 + math.cos(1.5), rel=1e-15)
    assert doc["status"] == "ok" and doc["capped"] is False


def test_cli_tangent_option():
    doc = strict_json(run(EXPR, "--at", "x=1.5, y=0.3", "--tangent", "x=0, y=1", "--json").stdout)
    assert doc["tangent"] == {"x": 0.0, "y": 1.0} and doc["directional_derivative"] == 1.5
    doc = strict_json(run(EXPR, "--at", "x=1.5, y=0.3", "--tangent", "0,2", "--json").stdout)
    assert doc["directional_derivative"] == 3.0


@pytest.mark.parametrize("args, message", [
    (["2x", "--at", "x=1"], "did you mean 2*x?"),
    (["x*y", "--at", "x=1"], "no value for y"),
    (["x*y", "--at", "x=1, y=2", "--tangent", "1"], "--tangent has 1 component(s)"),
    (["x*y", "--at", "x=1, y=2", "--tangent", "z=1"], "--tangent: z is not a variable"),
    (["x*y", "--at", "x=1, y=2", "--tangent", "x=1, 0"], "--tangent: give every component"),
])
def test_cli_bad_input_exits_2_with_one_line(args, message):
    r = run(*args)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and message in r.stderr.splitlines()[0]
    r = run(*args, "--json")
    assert r.exit_code == 2 and strict_json(r.stdout)["status"] == "error"


def test_cli_undefined_point_exits_3_and_still_explains():
    r = run("log(x) + x", "--at", "x=-1")
    assert r.exit_code == 3 and r.stderr == ""
    assert "Wengert list" in r.stdout and "undefined: log(-1) is undefined" in r.stdout
    doc = strict_json(run("log(x) + x", "--at", "x=-1", "--json").stdout)
    assert doc["status"] == "undefined" and doc["wengert"][1]["value"] is None
    assert run("abs(x)", "--at", "x=0").exit_code == 3


def test_cli_caps_a_large_expression_and_all_lifts_it():
    r = run(BIG, "--at", "x=0.5")
    assert r.exit_code == 0 and r.stderr == ""
    n = len(parse(BIG).nodes)
    assert f"… {n - HEAD - TAIL} more steps …" in r.stdout and f"more than {CAP}" in r.stdout
    doc = strict_json(run(BIG, "--at", "x=0.5", "--json").stdout)
    assert doc["capped"] is True and {"gap": n - HEAD - TAIL} in doc["wengert"]
    doc = strict_json(run(BIG, "--at", "x=0.5", "--json", "--all").stdout)
    assert doc["capped"] is False and len(doc["wengert"]) == n
    r = run(BIG, "--at", "x=0.5", "--all")
    assert "more steps" not in r.stdout and f"v{n - 1} " in r.stdout
