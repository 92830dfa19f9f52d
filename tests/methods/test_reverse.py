"""Reverse mode: the tape, PyTorch's accumulation and freeing semantics, and the graph interpreter."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcli.core.graph import GraphBuilder
from gradcli.methods import reverse
from gradcli.methods.reverse import F, Var, grad, jacobian
from gradcli.core.primitives import PRIMITIVES

# fractions of each argument's sample box: different per argument so that min/max see x != y
FRACTIONS = (0.37, 0.71)


def _box(prim, i):
    # add, sub and mul give one box for both arguments
    return prim.sample[min(i, len(prim.sample) - 1)]


def _point(prim, fractions=FRACTIONS):
    return [lo + f * (hi - lo) for (lo, hi), f in ((_box(prim, i), fractions[i]) for i in range(prim.arity))]


def _central(prim, args, i, h=1e-5):
    step = h * max(1.0, abs(args[i]))
    up, down = list(args), list(args)
    up[i] += step
    down[i] -= step
    f = lambda a: float(prim.value(np, *(np.float64(v) for v in a)))
    return (f(up) - f(down)) / (2 * step)


def _reverse_partials(name, args):
    xs = [Var(a, requires_grad=True) for a in args]
    y = getattr(reverse, name)(*xs)
    return grad(y, xs)


# --- known derivatives -------------------------------------------------------------------------------

def test_known_derivative_x2_sin_y():
    x, y = Var(1.5, requires_grad=True), Var(0.3, requires_grad=True)
    f = x**2 * reverse.sin(y)
    f.backward()
    assert f.value == pytest.approx(1.5**2 * math.sin(0.3), rel=1e-15)
    assert x.grad == pytest.approx(2 * 1.5 * math.sin(0.3), rel=1e-15)
    assert y.grad == pytest.approx(1.5**2 * math.cos(0.3), rel=1e-15)


def test_known_derivative_quotient_and_reflected_operators():
    x, y = Var(0.7, requires_grad=True), Var(2.0, requires_grad=True)
    f = (3 - x) / (1 + y) + 2**x - x / 4 + 5 * y - (-y) + np.float64(2.0) * x
    dx, dy = grad(f, [x, y])
    assert dx == pytest.approx(-1 / 3.0 + math.log(2) * 2**0.7 - 0.25 + 2.0, rel=1e-14)
    assert dy == pytest.approx(-(3 - 0.7) / 9.0 + 5 + 1, rel=1e-14)


def test_exp_log_tanh_chain():
    x = Var(0.4, requires_grad=True)
    f = reverse.exp(reverse.tanh(x)) * reverse.log(1 + x * x)
    f.backward()
    t = math.tanh(0.4)
    expected = math.exp(t) * (1 - t * t) * math.log(1.16) + math.exp(t) * 2 * 0.4 / 1.16
    assert x.grad == pytest.approx(expected, rel=1e-14)


def test_shared_subexpressions_sum_all_paths():
    x = Var(1.3, requires_grad=True)
    s = reverse.sin(x)
    f = x * x + s * x + s * s  # x reaches f along five paths
    f.backward()
    expected = 2 * 1.3 + math.cos(1.3) * 1.3 + math.sin(1.3) + 2 * math.sin(1.3) * math.cos(1.3)
    assert x.grad == pytest.approx(expected, rel=1e-14)


# --- every primitive against a central difference ------------------------------------------------

@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@pytest.mark.parametrize("fractions", [FRACTIONS, (0.83, 0.12)])
def test_primitive_gradient_vs_central_difference(name, fractions):
    prim = PRIMITIVES[name]
    args = _point(prim, fractions)
    got = _reverse_partials(name, args)
    for i in range(prim.arity):
        assert got[i] == pytest.approx(_central(prim, args, i), rel=1e-6, abs=1e-9), (name, i)


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_on_arrays_is_elementwise(name):
    prim = PRIMITIVES[name]
    cols = [_point(prim, (f, 1 - f)) for f in (0.15, 0.4, 0.65, 0.9)]
    xs = [Var(np.array([c[i] for c in cols]), requires_grad=True) for i in range(prim.arity)]
    y = F.apply(name, *xs)
    y.backward(seed=np.ones(len(cols)))
    for i, x in enumerate(xs):
        expected = [_central(prim, c, i) for c in cols]
        got = np.zeros(len(cols)) if x.grad is None else x.grad  # sign, step: no partial was recorded
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9, err_msg=name)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(n for n, p in PRIMITIVES.items() if p.kink is None and p.public)),
       f0=st.floats(0.05, 0.95), f1=st.floats(0.05, 0.95))
def test_smooth_primitives_anywhere_in_their_box(name, f0, f1):
    prim = PRIMITIVES[name]
    args = _point(prim, (f0, f1))
    got = _reverse_partials(name, args)
    for i in range(prim.arity):
        assert got[i] == pytest.approx(_central(prim, args, i), rel=1e-6, abs=1e-8), (name, args, i)


def test_module_getattr_exposes_every_primitive():
    for name in PRIMITIVES:
        assert callable(getattr(reverse, name))
    with pytest.raises(AttributeError):
        reverse.no_such_function  # noqa: B018
    with pytest.raises(TypeError, match="atan2 takes 2"):
        reverse.atan2(Var(1.0, requires_grad=True))


# --- Var basics --------------------------------------------------------------------------------------

def test_values_are_numpy_float64_unless_told_otherwise():
    assert Var(2).value.dtype == np.float64
    assert Var(2.0).shape == ()
    assert Var([1, 2, 3]).value.dtype == np.float64
    assert Var(np.ones(3, dtype=np.float32)).value.dtype == np.float32
    assert Var(1 + 2j).value.dtype == np.complex128
    with np.errstate(divide="ignore"):
        assert (Var(1.0, requires_grad=True) / 0).value == np.inf  # numpy semantics, no exception


def test_leaves_and_constants():
    x, c = Var(2.0, requires_grad=True), Var(3.0)
    y = x * c
    assert x.is_leaf and c.is_leaf and not y.is_leaf
    assert y.requires_grad and x.grad is None and y.grad is None
    k = c * 2 + reverse.sin(c)  # no input requires grad: a constant, not on the tape
    assert not k.requires_grad and k.is_leaf
    with pytest.raises(RuntimeError, match="does not require grad"):
        k.backward()
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.value == y.value


def test_zero_derivative_rules_are_skipped():
    x = Var(0.5, requires_grad=True)
    s = reverse.sign(x)
    assert s.requires_grad and s._parents == ()
    (g,) = grad(s * 1.0 + x * 0.0, [x])
    assert g == 0.0


# --- PyTorch semantics: accumulation, zero_grad, freeing ---------------------------------------------

def test_backward_accumulates_into_leaf_grad():
    x = Var(2.0, requires_grad=True)
    y = x**3
    y.backward(retain_graph=True)
    assert x.grad == pytest.approx(12.0)
    y.backward()
    assert x.grad == pytest.approx(24.0)


def test_zero_grad():
    x = Var(np.array([1.0, 2.0]), requires_grad=True)
    (x * x).backward(seed=np.ones(2))
    np.testing.assert_allclose(x.grad, [2.0, 4.0])
    x.zero_grad()
    assert x.grad is None
    (x * x).backward(seed=np.ones(2))
    x.zero_grad(set_to_none=False)
    assert isinstance(x.grad, np.ndarray) and x.grad.shape == (2,) and not x.grad.any()
    (x * 3).backward(seed=np.ones(2))
    np.testing.assert_allclose(x.grad, [3.0, 3.0])


def test_second_backward_through_freed_graph_raises():
    x = Var(2.0, requires_grad=True)
    y = reverse.exp(x) * x
    y.backward()
    first = x.grad
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time") as err:
        y.backward()
    assert "retain_graph=True" in str(err.value)
    assert x.grad == first  # the failed call changed nothing
    with pytest.raises(RuntimeError, match="second time"):
        (y + 1).backward()  # a new op on top still reaches the freed nodes
    with pytest.raises(RuntimeError, match="second time"):
        grad(y, [x])


def test_retain_graph_keeps_partials_for_grad_too():
    x = Var(1.5, requires_grad=True)
    y = reverse.sin(x) * x
    g1 = grad(y, [x], retain_graph=True)
    g2 = grad(y, [x])
    assert g1 == g2
    with pytest.raises(RuntimeError, match="second time"):
        grad(y, [x])


def test_leaf_backward_and_fresh_grad_arrays():
    x = Var(np.array([1.0, 2.0]), requires_grad=True)
    seed = np.array([3.0, 4.0])
    x.backward(seed=seed)
    np.testing.assert_allclose(x.grad, seed)
    x.grad[0] = 99.0
    assert seed[0] == 3.0  # .grad is the leaf's own array, not the caller's seed


def test_non_scalar_output_needs_a_seed():
    x = Var(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs; pass seed="):
        y.backward()
    with pytest.raises(RuntimeError, match="shape"):
        y.backward(seed=np.ones(4))
    y.backward(seed=np.array([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(x.grad, [2.0, 0.0, -2.0])


# --- functional grad -----------------------------------------------------------------------------

def test_functional_grad_leaves_dot_grad_alone():
    x, y = Var(1.0, requires_grad=True), Var(2.0, requires_grad=True)
    y.grad = np.float64(7.0)
    f = x * y + y
    gx, gy = grad(f, [x, y])
    assert (gx, gy) == (2.0, 2.0)
    assert x.grad is None and y.grad == 7.0


def test_functional_grad_unreachable_intermediate_and_several_outputs():
    x = Var(np.array([1.0, 2.0]), requires_grad=True)
    z = Var(np.zeros((2, 3)), requires_grad=True)
    h = x * x
    f = reverse.sin(h)
    gx, gh, gz = grad(f, [x, h, z], seeds=np.ones(2), retain_graph=True)
    np.testing.assert_allclose(gh, np.cos([1.0, 4.0]))
    np.testing.assert_allclose(gx, np.cos([1.0, 4.0]) * 2 * np.array([1.0, 2.0]))
    assert gz.shape == (2, 3) and not gz.any()
    (g,) = grad([f, h], [x], seeds=[np.ones(2), 2 * np.ones(2)])
    np.testing.assert_allclose(g, gx + 4 * np.array([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="requires grad"):
        grad(f, [Var(1.0)])


# --- broadcasting --------------------------------------------------------------------------------

def test_scalar_broadcast_against_array_gets_the_sum():
    s = Var(2.0, requires_grad=True)
    a = Var(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = s * a + s
    y.backward(seed=np.ones(3))
    assert s.grad == pytest.approx(6.0 + 3.0)
    assert np.shape(s.grad) == ()
    np.testing.assert_allclose(a.grad, [2.0, 2.0, 2.0])


def test_broadcast_along_kept_dimensions():
    col = Var(np.array([[1.0], [2.0]]), requires_grad=True)  # (2, 1)
    row = Var(np.array([1.0, 10.0, 100.0]), requires_grad=True)  # (3,)
    y = col * row - row  # (2, 3)
    seed = np.arange(6.0).reshape(2, 3)
    y.backward(seed=seed)
    assert col.grad.shape == (2, 1) and row.grad.shape == (3,)
    np.testing.assert_allclose(col.grad, (seed * row.value).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(row.grad, (seed * (col.value - 1)).sum(axis=0))


def test_array_grad_through_plain_number_partial():
    # add's partial is the plain number 1.0: the adjoint must still take the argument's shape
    a = Var(np.array([1.0, 2.0]), requires_grad=True)
    (g,) = grad(a + 1.0, [a], seeds=np.float64(1.0))
    np.testing.assert_allclose(g, [1.0, 1.0])


# --- deep chains ---------------------------------------------------------------------------------

def test_chain_of_100000_ops():
    x = Var(0.5, requires_grad=True)
    y, expected, v = x, 1.0, 0.5
    for _ in range(100_000):
        expected *= math.cos(v)
        v = math.sin(v)
        y = reverse.sin(y)
    y.backward()
    assert y.value == pytest.approx(v, rel=1e-12)
    assert x.grad == pytest.approx(expected, rel=1e-9)


# --- the graph interpreter -------------------------------------------------------------------------

def test_jacobian_two_outputs():
    b = GraphBuilder()
    x, y = b.var("x"), b.var("y")
    f1 = b.apply("mul", b.apply("pow", x, b.const(2)), b.apply("sin", y))
    f2 = b.apply("add", b.apply("mul", x, y), b.apply("exp", b.apply("div", x, y)))
    graph = b.build([f1, f2])
    values, jac = jacobian(graph, {"x": 1.5, "y": 0.3})
    X, Y = 1.5, 0.3
    assert values == pytest.approx([X**2 * math.sin(Y), X * Y + math.exp(X / Y)], rel=1e-15)
    assert all(type(v) is float for v in values)
    expected = [[2 * X * math.sin(Y), X**2 * math.cos(Y)],
                [Y + math.exp(X / Y) / Y, X - X / Y**2 * math.exp(X / Y)]]
    assert jac.shape == (2, 2) and jac.dtype == np.float64
    np.testing.assert_allclose(jac, expected, rtol=1e-14)


def test_jacobian_constant_outputs_and_unused_variables():
    b = GraphBuilder()
    x = b.var("x")
    b.var("z")
    graph = b.build([b.const(3.5), x, b.apply("sin", b.const(1.0))])
    values, jac = jacobian(graph, {"x": 2.0, "z": 1.0})
    assert values == pytest.approx([3.5, 2.0, math.sin(1.0)])
    np.testing.assert_array_equal(jac, [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])


def test_jacobian_division_by_zero_gives_inf_not_exceptions():
    b = GraphBuilder()
    x = b.var("x")
    graph = b.build([b.apply("div", b.const(1), x), b.apply("log", x)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values, jac = jacobian(graph, {"x": 0.0})
    assert values[0] == np.inf and values[1] == -np.inf
    assert not np.isfinite(jac).any()


def test_jacobian_of_a_100000_node_chain():
    b = GraphBuilder()
    x = b.var("x")
    node, expected, v = x, 1.0, 0.5
    for _ in range(100_000):
        expected *= math.cos(v)
        v = math.sin(v)
        node = b.apply("sin", node)
    graph = b.build([node, b.apply("mul", node, x)])
    values, jac = jacobian(graph, {"x": 0.5})
    assert values[0] == pytest.approx(v, rel=1e-12)
    assert jac[0, 0] == pytest.approx(expected, rel=1e-9)
    assert jac[1, 0] == pytest.approx(expected * 0.5 + v, rel=1e-9)
