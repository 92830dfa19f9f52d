"""Compile a graph's value and gradient into a straight-line program.

The reverse sweep is run once, symbolically: the partial rules of the primitive table are applied to
graph nodes instead of numbers (:class:`GraphOps`), so the adjoint of every variable becomes a node of
a new graph. Hash-consing makes shared subexpressions one node (``cos(x)`` used by two partials is
computed once), trivial products (by 0, by 1) are never built, and nodes that no output reads are
pruned. The result is a :class:`Program`: instructions over numbered registers, reused as soon as a
value is dead, that numpy (with ``out=`` buffers) or a generated CUDA kernel can execute as is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.graph import Graph, GraphBuilder, Node, graph_sweep, walk
from gradcli.core.primitives import PRIMITIVES, Ops


class Handle:
    """A node of a GraphBuilder with Python arithmetic, so partial rules can build graphs."""

    __slots__ = ("b", "i")

    def __init__(self, builder: GraphBuilder, index: int):
        self.b, self.i = builder, index

    def __add__(self, o): return _binary("add", self, o)
    def __radd__(self, o): return _binary("add", o, self)
    def __sub__(self, o): return _binary("sub", self, o)
    def __rsub__(self, o): return _binary("sub", o, self)
    def __mul__(self, o): return _binary("mul", self, o)
    def __rmul__(self, o): return _binary("mul", o, self)
    def __truediv__(self, o): return _binary("div", self, o)
    def __rtruediv__(self, o): return _binary("div", o, self)
    def __pow__(self, o): return _binary("pow", self, o)
    def __rpow__(self, o): return _binary("pow", o, self)
    def __neg__(self): return GraphOps(self.b).build("neg", self)


def _is(v, c) -> bool:
    return isinstance(v, (int, float)) and v == c


def _binary(op, x, y):
    # never build x*1, x*0, x+0, x/1: the reverse sweep produces them at every edge
    if op == "mul":
        if _is(x, 0) or _is(y, 0):
            return np.float64(0.0)
        if _is(x, 1):
            return y
        if _is(y, 1):
            return x
        if _is(x, -1):
            return -y
        if _is(y, -1):
            return -x
    if op == "add":
        if _is(x, 0):
            return y
        if _is(y, 0):
            return x
    if op == "sub":
        if _is(y, 0):
            return x
        if _is(x, 0):
            return -y
    if op == "div" and _is(y, 1):
        return x
    if op == "pow" and isinstance(x, Handle):
        # d/dx x**2 is 2*x**1: strength-reduce the powers the partial rules produce
        if _is(y, 1):
            return x
        if _is(y, 2):
            return _binary("mul", x, x)
        if _is(y, 0):
            return np.float64(1.0)
    if not isinstance(x, Handle) and not isinstance(y, Handle):  # two numbers: fold
        with np.errstate(all="ignore"):
            return np.float64(PRIMITIVES[op].value(np, np.float64(x), np.float64(y)))
    b = x.b if isinstance(x, Handle) else y.b
    return GraphOps(b).build(op, x, y)


class GraphOps(Ops):
    """Primitives that build graph nodes (constants folded, so the program holds no constant work)."""

    def __init__(self, builder: GraphBuilder):
        self.b = builder

    def node(self, v) -> int:
        return v.i if isinstance(v, Handle) else self.b.const(float(v))

    def apply(self, name, *args):
        if name in _ARITHMETIC and any(isinstance(a, Handle) for a in args):
            return _binary(name, *args)
        return self.build(name, *args)

    def build(self, name, *args):
        if not any(isinstance(a, Handle) for a in args):
            with np.errstate(all="ignore"):
                # a folded constant stays float64 (a Python float would make a later 1/0 raise)
                return np.float64(PRIMITIVES[name].value(np, *(np.float64(a) for a in args)))
        return Handle(self.b, self.b.apply(name, *(self.node(a) for a in args)))


_ARITHMETIC = ("add", "sub", "mul", "div", "pow")


def prune(nodes, outputs) -> tuple[list, list]:
    """Keep only the nodes some output reads, renumbered in the same (topological) order."""
    keep = [False] * len(nodes)
    for o in outputs:
        keep[o] = True
    for i in range(len(nodes) - 1, -1, -1):
        if keep[i]:
            for a in nodes[i].args:
                keep[a] = True
    new_index, kept = {}, []
    for i, n in enumerate(nodes):
        if keep[i]:
            new_index[i] = len(kept)
            kept.append(Node(n.op, tuple(new_index[a] for a in n.args), n.attr))
    return kept, [new_index[o] for o in outputs]


def gradient_graph(graph: Graph, absolute: bool = False) -> Graph:
    """A graph whose outputs are the values of ``graph`` and then its Jacobian, row by row:
    ``[f_1 .. f_m, df_1/dx_1 .. df_1/dx_n, .., df_m/dx_n]``.

    With ``absolute``, every local partial is replaced by its absolute value: the outputs are then
    the Jacobian computed without cancellation (the ``scale`` of gradcli's tolerances).
    """
    b = GraphBuilder()
    F = GraphOps(b)
    # plain numbers for the constants: folded and simplified wherever they meet (numpy's float64, a
    # float that makes 1/0 inf for the diagnostics to report, not a ZeroDivisionError)
    with np.errstate(all="ignore"):
        h = walk(graph, F, lambda name: Handle(b, b.var(name)), const=lambda i, c: np.float64(c.value),
                 keep=True)
    for v in graph.variables:  # keep the variable order, also for variables the outputs ignore
        b.var(v)
    active = graph.active

    def partial(i, k):
        node = graph.nodes[i]
        if not active[node.args[k]]:
            return None
        p = PRIMITIVES[node.op].partials[k](F, h[i], *(h[a] for a in node.args))
        if absolute:
            p = abs(p) if isinstance(p, float) else F.abs(p)
        return p

    rows = []
    with np.errstate(all="ignore"):  # constants folded as float64: 1/0 is inf, reported by the diagnostics
        for r in range(len(graph.outputs)):
            by_var = graph_sweep(graph, r, partial, 1.0, mul=lambda a, p, k: _binary("mul", a, p),
                                 add=lambda x, y: _binary("add", x, y))
            rows.extend(by_var.get(v, 0.0) for v in graph.variables)
    outs = [F.node(h[o]) for o in graph.outputs] + [F.node(r) for r in rows]
    nodes, outs = prune(b.nodes, outs)
    return Graph(nodes, outs, graph.variables)


@dataclass(frozen=True)
class Instruction:
    op: str  # a primitive name
    out: int  # register
    args: tuple  # registers (int) or constants (float)


@dataclass(frozen=True)
class Program:
    """Straight-line code: registers 0..n_vars-1 hold the inputs; ``outputs`` name a register or a
    constant (float) for each output, in :func:`gradient_graph`'s order."""

    variables: tuple
    n_outputs: int  # values of the expression (the rest of ``outputs`` is the Jacobian)
    instructions: tuple
    outputs: tuple
    n_registers: int
    graph: Graph

    def __len__(self):
        return len(self.instructions)


def compile_graph(graph: Graph, absolute: bool = False) -> Program:
    """The value-and-gradient program of ``graph``, registers allocated by liveness."""
    g = gradient_graph(graph, absolute=absolute)
    return allocate(g, len(graph.outputs))


def allocate(g: Graph, n_values: int) -> Program:
    """Registers for every computed node, reusing a register as soon as its value is dead."""
    n = len(g.variables)
    where: dict = {}  # node -> register or constant
    for i, node in enumerate(g.nodes):
        if node.op == "var":
            where[i] = g.variables.index(node.attr)
        elif node.op == "const":
            where[i] = float(node.attr.value)
    last = g.last_use
    free: list = []
    n_regs = n
    code = []
    for i, node in enumerate(g.nodes):
        if node.op in ("var", "const"):
            continue
        args = tuple(where[a] for a in node.args)
        # the arguments that die here can give their register to the result (ufuncs work in place)
        for a in set(node.args):
            if last[a] == i and g.nodes[a].op not in ("var", "const"):
                free.append(where[a])
        if free:
            reg = free.pop()
        else:
            reg, n_regs = n_regs, n_regs + 1
        where[i] = reg
        code.append(Instruction(node.op, reg, args))
    return Program(tuple(g.variables), n_values, tuple(code), tuple(where[o] for o in g.outputs), n_regs, g)


def run(program: Program, inputs: dict, xp=np) -> list:
    """The reference executor: whole arrays, no buffers reused. Returns one array per output."""
    regs: list = [None] * program.n_registers
    for k, v in enumerate(program.variables):
        regs[k] = xp.asarray(inputs[v])
    shape = xp.broadcast_shapes(*(r.shape for r in regs[:len(program.variables)])) if program.variables else ()
    with np.errstate(all="ignore"):
        for ins in program.instructions:
            regs[ins.out] = PRIMITIVES[ins.op].value(xp, *(regs[a] if isinstance(a, int) else a for a in ins.args))
    return [xp.broadcast_to(xp.asarray(regs[o] if isinstance(o, int) else o, dtype=float), shape)
            for o in program.outputs]
