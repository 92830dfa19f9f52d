"""One parametrised walk over the whole primitive table.

For every primitive, at points drawn from its sample box: the value against sympy, each partial rule
against ``sympy.diff`` of the sympy counterpart, forward vs reverse vs the numerical methods through a
one-node graph, and the second derivative from nested dual numbers against sympy.
"""
import math

import numpy as np
import pytest
import sympy

from gradcli.core.graph import GraphBuilder
from gradcli.methods import forward, numeric, reverse
from gradcli.methods.forward import Dual, DualOps
from gradcli.core.primitives import FUNCTION_NAMES, PRIMITIVES, NumericOps

NAMES = sorted(PRIMITIVES)


def sample_points(prim, count=5, seed=0):
    rng = np.random.default_rng(seed + sum(map(ord, prim.name)))
    pts = []
    while len(pts) < count:
        args = [rng.uniform(lo, hi) for lo, hi in prim.sample]
        if prim.kink is not None and bool(prim.kink(np, *args)):
            continue
        if prim.name in ("min", "max") and abs(args[0] - args[1]) < 0.05:
            continue
        if prim.name in ("abs", "sign", "relu", "step") and abs(args[0]) < 0.05:
            continue
        pts.append([np.float64(a) for a in args])
    return pts


def sym_args(prim):
    return sympy.symbols(f"a0:{prim.arity}", real=True)


def exact(expr, syms, args):
    return expr.evalf(40, subs={s: sympy.Rational(float(a)) for s, a in zip(syms, args)})


def close(a, b, rtol):
    return abs(float(a) - float(b)) <= rtol * max(abs(float(b)), 1e-300) + 1e-300


@pytest.mark.parametrize("name", NAMES)
def test_value_matches_sympy(name):
    prim = PRIMITIVES[name]
    syms = sym_args(prim)
    for args in sample_points(prim):
        got = prim.value(np, *args)
        want = exact(prim.sympy(*syms), syms, args)
        assert close(got, want, 1e-13), (name, args, got, want)


@pytest.mark.parametrize("name", NAMES)
def test_partials_match_sympy_diff(name):
    prim = PRIMITIVES[name]
    syms = sym_args(prim)
    F = NumericOps()
    for args in sample_points(prim):
        ans = prim.value(np, *args)
        for k, rule in enumerate(prim.partials):
            got = rule(F, ans, *args)
            d = sympy.diff(prim.sympy(*syms), syms[k]).replace(sympy.DiracDelta, lambda *a: sympy.S.Zero)
            want = exact(d, syms, args)
            assert close(got, want, 1e-12), (name, k, args, got, want)


def one_node_graph(name):
    b = GraphBuilder()
    args = [b.var(f"a{k}") for k in range(PRIMITIVES[name].arity)]
    return b.build([b.apply(name, *args)])


@pytest.mark.parametrize("name", NAMES)
def test_forward_reverse_numeric_agree(name):
    prim = PRIMITIVES[name]
    g = one_node_graph(name)
    for args in sample_points(prim, count=3):
        point = {f"a{k}": float(a) for k, a in enumerate(args)}
        vf, Jf = forward.jacobian(g, point)
        vr, Jr = reverse.jacobian(g, point)
        assert vf == pytest.approx(vr, rel=1e-15)
        np.testing.assert_allclose(Jf, Jr, rtol=1e-14, atol=1e-300)
        c = numeric.central(g, point)
        np.testing.assert_allclose(c.jacobian, Jf, rtol=1e-6, atol=1e-9)
        r = numeric.richardson(g, point)
        np.testing.assert_allclose(r.jacobian, Jf, rtol=1e-9, atol=1e-12)
        # the estimate must cover the actual error
        assert np.all(np.abs(r.jacobian - Jf) <= 10 * r.error + 1e-15)
        cs = numeric.complex_step(g, point)
        if prim.holomorphic:
            assert cs.status == "ok"
            np.testing.assert_allclose(cs.jacobian, Jf, rtol=1e-13, atol=1e-300)
        else:
            assert cs.status == "unavailable" and name in cs.message


@pytest.mark.parametrize("name", [n for n in NAMES if PRIMITIVES[n].arity == 1])
def test_second_derivative_by_nested_duals(name):
    prim = PRIMITIVES[name]
    (s,) = sym_args(prim)
    F2 = DualOps(inner=DualOps())
    for (a,) in sample_points(prim, count=3):
        x = Dual(Dual(a, 1.0), Dual(1.0, 0.0))
        y = F2.apply(name, x)
        second = y.tangent.tangent if isinstance(y, Dual) and isinstance(y.tangent, Dual) else 0.0
        d2 = sympy.diff(prim.sympy(s), s, 2).replace(sympy.DiracDelta, lambda *q: sympy.S.Zero)
        want = exact(d2, (s,), (a,))
        assert close(second, want, 1e-10), (name, a, second, want)


def test_language_functions_are_all_in_the_table():
    documented = ("sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp expm1 log ln log2 "
                  "log10 log1p sqrt cbrt abs sign erf erfc hypot pow min max sigmoid softplus relu").split()
    assert sorted(documented) == sorted(FUNCTION_NAMES)


def test_cbrt_is_the_real_cube_root():
    assert PRIMITIVES["cbrt"].value(np, np.float64(-8.0)) == -2.0
    g = one_node_graph("cbrt")
    _, J = forward.jacobian(g, {"a0": -8.0})
    assert J[0, 0] == pytest.approx(1 / 12, rel=1e-15)


def test_kinks_and_domains_are_declared():
    assert PRIMITIVES["abs"].kink(np, 0.0) and not PRIMITIVES["abs"].kink(np, 1e-300)
    assert not PRIMITIVES["log"].domain(np, 0.0)
    assert PRIMITIVES["sqrt"].domain(np, 0.0) and not PRIMITIVES["sqrt"].smooth(np, 0.0)
    assert not PRIMITIVES["pow"].domain(np, -8.0, 1 / 3) and PRIMITIVES["pow"].domain(np, -2.0, 3.0)
    for name in ("abs", "sign", "relu", "min", "max", "hypot", "erf", "cbrt", "atan2"):
        assert not PRIMITIVES[name].holomorphic, name
    assert math.isclose(PRIMITIVES["sigmoid"].value(np, np.float64(-800.0)), 0.0, abs_tol=1e-300)
    assert PRIMITIVES["softplus"].value(np, np.float64(800.0)) == 800.0
