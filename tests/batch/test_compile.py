"""The compiler: value and gradient as straight-line code, checked against the interpreters."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from gradcli.engines.program import compile_graph, gradient_graph, run
from gradcli.verdict.point import magnitudes
from gradcli.verdict.diagnose import diagnose
from gradcli.methods import forward
from gradcli.core.parser import parse

from strategies import coords, expressions

E = {
    "E1": "x*y + sin(x)",
    "E2": "exp(-(x**2 + y**2)/2) * cos(3*x*y)",
    "E3": "log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2",
    "E4": "+".join(f"sin({k}*x + y)*exp(-{k}*z)" for k in range(1, 11)),
}


def expected(graph, point):
    vals, J = forward.jacobian(graph, point)
    return np.concatenate([vals, J.ravel()])


@pytest.mark.parametrize("name", sorted(E))
def test_program_matches_forward_mode(name):
    g = parse(E[name])
    prog = compile_graph(g)
    rng = np.random.default_rng(1)
    pts = {v: rng.uniform(-1, 1, 20) for v in g.variables}
    outs = np.stack(run(prog, pts))
    for i in range(20):
        want = expected(g, {v: pts[v][i] for v in g.variables})
        np.testing.assert_allclose(outs[:, i], want, rtol=1e-13, atol=1e-15)


def test_shared_work_is_done_once():
    # d/dx (x*y + sin(x)) = y + cos(x), d/dy = x: value and gradient in five instructions
    prog = compile_graph(parse(E["E1"]))
    assert sorted(i.op for i in prog.instructions) == ["add", "add", "cos", "mul", "sin"]
    # exp(x)*exp(x): the partials reuse the value's exp node
    ops = [i.op for i in compile_graph(parse("exp(x)*exp(x)")).instructions]
    assert ops.count("exp") == 1


def test_registers_are_reused():
    prog = compile_graph(parse(E["E4"]))
    assert prog.n_registers < len(prog.instructions) / 2


def test_constant_and_input_outputs():
    prog = compile_graph(parse("x*y, 3*x, 2"))
    outs = np.stack(run(prog, {"x": np.array([2.0, 5.0]), "y": np.array([7.0, 11.0])}))
    # values, then the Jacobian row-major: [y, x], [3, 0], [0, 0]
    np.testing.assert_array_equal(outs, [[14, 55], [6, 15], [2, 2], [7, 11], [2, 5], [3, 3], [0, 0], [0, 0],
                                         [0, 0]])


def test_absolute_program_is_the_tolerance_scale():
    g = parse("x - sin(x) + x*y")
    prog = compile_graph(g, absolute=True)
    outs = np.stack(run(prog, {"x": np.array([0.3]), "y": np.array([-2.0])}))
    np.testing.assert_allclose(outs[1:, 0], magnitudes(g, {"x": 0.3, "y": -2.0})[0], rtol=1e-15)


def test_gradient_graph_keeps_variable_order_even_for_unused_variables():
    g = gradient_graph(parse("y*0 + x"))
    assert g.variables == ("y", "x")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(expressions, coords, coords, coords)
def test_random_expressions_compile_to_the_same_gradient(text, x, y, z):
    g = parse(text)
    point = {v: {"x": x, "y": y, "z": z}[v] for v in g.variables}
    diags, _, _ = diagnose(g, point)
    assume(not diags)
    want = expected(g, point)
    assume(np.all(np.isfinite(want)))
    got = np.array([o.item() for o in run(compile_graph(g), {k: np.array(v) for k, v in point.items()})])
    # the compiled sweep rounds in another order: a derivative that cancels to 0 (d/dx of
    # atan2(0.5, x/(3x))) is only known relative to its terms' size
    scale = np.concatenate([np.abs(want[:len(g.outputs)]), np.ravel(magnitudes(g, point))])
    assert np.all(np.abs(got - want) <= 1e-12 * np.abs(want) + 1e-14 * scale + 1e-300), (got, want)
