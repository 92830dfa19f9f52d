"""sympy's derivative expressions turned back into a gradcli Graph, so the symbolic reference can be
evaluated over arrays of points (on the CPU or the GPU) with ``graph.evaluate``.

Never ``sympy.lambdify`` (it generates Python source from the expression and execs it) and never
eval/exec: the sympy tree is walked iteratively over a whitelist of node types, and anything outside
it (``Piecewise``, ``zoo``, a special function gradcli has no primitive for) raises
:class:`Unsupported`, which makes the symbolic method ``unavailable`` in batch mode.
"""
from __future__ import annotations

import functools
import math

import sympy

from gradcli.core.graph import Graph, GraphBuilder
from gradcli.core.primitives import PRIMITIVES
from gradcli.core.sympy_functions import sympy_namespace
from gradcli.engines.program import GraphOps, Handle, prune


@functools.cache
def heads() -> dict:
    """sympy function class -> (primitive, its argument count), read off the table's sympy forms.

    A primitive whose form is one sympy function applied to its arguments (sin, atan2, Abs, Min,
    log1p...) is that function's way back; numeric parameters after the arguments (Heaviside's value at
    0) are ignored on the way back. Compound forms (expm1 is exp(x) - 1) come back through their parts.
    """
    S = sympy_namespace()
    found: dict = {}
    for name, prim in PRIMITIVES.items():
        syms = S.symbols(f"a0:{prim.arity}", real=True)
        e = prim.sympy(*syms)
        if e.is_Function and e.args[:prim.arity] == tuple(syms) \
                and all(a.is_Number for a in e.args[prim.arity:]):
            assert e.func not in found, (name, found.get(e.func))
            found[e.func] = (name, prim.arity)
    return found


class Unsupported(ValueError):
    """The expression holds a sympy node batch mode cannot evaluate."""


def _number(e) -> float:
    """The float64 nearest the number ``e``: +-inf beyond float64's range (10**400, as float64 rounds
    it), never an OverflowError."""
    if e is sympy.pi:
        return math.pi
    if e is sympy.E:
        return math.e
    if e.is_Rational:
        p, q = int(e.p), int(e.q)
        try:
            return p / q  # correctly rounded, also for huge p and q
        except OverflowError:
            return math.inf if p > 0 else -math.inf
    if e.is_Float:
        return float(e)
    raise Unsupported(f"the number {sympy.sstr(e)}")


def _is_number(e) -> bool:
    return e is sympy.pi or e is sympy.E or (e.is_Number and (e.is_Rational or e.is_Float) and e.is_finite)


def _plan(e, F: GraphOps):
    """-> (children to convert first, combine(list of converted children) -> value)."""
    if _is_number(e):
        v = _number(e)
        return (), lambda _: v
    if e.is_Symbol:
        return (), None  # handled by the caller: it needs the builder
    if e.is_Add:
        def add(xs):
            total = xs[0]
            for x in xs[1:]:
                total = total + x
            return total
        return tuple(e.args), add
    if e.is_Mul:
        # x * y**-1 * z**-2 -> (x) / (y * z**2): one rounding for the quotient instead of a reciprocal each
        num, den = [], []
        for f in e.args:
            if f.is_Pow and f.exp.is_Number and f.exp.is_negative:
                den.append(sympy.Pow(f.base, -f.exp))
            else:
                num.append(f)
        k = len(num)

        def mul(xs):
            top = _product(xs[:k])
            return top / _product(xs[k:]) if len(xs) > k else top
        return tuple(num + den), mul
    if e.is_Pow:
        b, x = e.base, e.exp
        if b is sympy.E:
            return (x,), lambda xs: F.apply("exp", xs[0])
        if x == sympy.S.Half:
            return (b,), lambda xs: F.apply("sqrt", xs[0])
        if x == -sympy.S.Half:
            return (b,), lambda xs: 1.0 / F.apply("sqrt", xs[0])
        if x.is_Number and x.is_negative:
            return (sympy.Pow(b, -x),), lambda xs: 1.0 / xs[0]
        return (b, x), lambda xs: F.apply("pow", xs[0], xs[1])
    head = heads().get(e.func)
    if head is not None:
        name, arity = head
        args = e.args
        if PRIMITIVES[name].args[1] is None and len(args) > arity:  # Min(a, b, c): a fold, as the parser's
            def fold(xs):
                acc = xs[0]
                for x in xs[1:]:
                    acc = F.apply(name, acc, x)
                return acc
            return tuple(args), fold
        if len(args) < arity or not all(_is_number(a) for a in args[arity:]):
            raise Unsupported(f"{e.func.__name__} with {len(args)} arguments")
        return args[:arity], lambda xs: F.apply(name, *xs)
    raise Unsupported(type(e).__name__)


def _product(xs):
    if not xs:
        return 1.0
    acc = xs[0]
    for x in xs[1:]:
        acc = acc * x
    return acc


def to_graph(exprs, variables, symbols: dict) -> Graph:
    """A Graph whose outputs are ``exprs`` (a flat list of sympy expressions) over ``variables``.

    ``symbols`` maps each variable name to its sympy Symbol. The walk is iterative (a deep sympy
    tree is fine) and shares every repeated subexpression.
    """
    b = GraphBuilder()
    F = GraphOps(b)
    by_symbol = {s: name for name, s in symbols.items()}
    done: dict = {}
    for e in exprs:
        stack = [(e, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if node.is_Symbol:
                if node not in by_symbol:
                    raise Unsupported(f"the symbol {node}")
                done[node] = Handle(b, b.var(by_symbol[node]))
                continue
            children, combine = _plan(node, F)
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in children if c not in done)
                continue
            if any(c not in done for c in children):  # a child was pushed after us: come back later
                stack.append((node, True))
                stack.extend((c, False) for c in children if c not in done)
                continue
            try:
                done[node] = combine([done[c] for c in children])
            except ArithmeticError:  # Python floats divide by zero (a constant 1/0) or overflow
                raise Unsupported(f"a division by zero or an overflow in {sympy.sstr(node)[:80]}") from None
    for v in variables:
        b.var(v)
    outs = [F.node(done[e]) for e in exprs]
    nodes, outs = prune(b.nodes, outs)
    return Graph(nodes, outs, variables)
