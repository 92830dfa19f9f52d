"""The expression graph: immutable, hash-consed, topologically ordered.

A node refers to its arguments by index, and arguments always come before their users, so the node list
is already a Wengert list. :func:`walk` is the one interpreter, a plain loop over it (no recursion,
so a chain of 100,000 nodes is as easy as three) with an ``Ops`` saying what a value is (a number, an
array, a dual number, a tape variable, a graph node, a diagnosis); :func:`sweep_back` is the one
reverse sweep, over this list backward or over a tape.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, NamedTuple

import numpy as np

from gradcli.core.primitives import CONSTANTS, PRIMITIVES, NumericOps

MAX_NODES = 1_000_000
#: The most decimal digits a constant's exact rational may take (numerator and denominator together):
#: float64 spans 1e-324 to 1e308, so this leaves room for any literal a float can tell apart, while
#: 1e-99999999999 (a hundred-billion-digit power of ten, which no computer can hold) is refused.
MAX_EXACT_DIGITS = 1_000

_DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")


class GraphError(ValueError):
    """A graph could not be built (too large, wrong arity...)."""


@dataclass(frozen=True)
class Const:
    """A constant: its float value and the exact text it came from ("0.1", "2", "pi")."""

    value: float
    text: str

    def exact(self):
        """The exact rational (or named constant) the user wrote, for the symbolic reference; None where
        there is none to use: a text that is not a finite decimal ("inf" of a folded constant), or one
        whose rational would need more than MAX_EXACT_DIGITS digits (see :meth:`inexact_reason`)."""
        if self.text in CONSTANTS:
            return self.text
        parts = _decimal_parts(self.text)
        if parts is None:
            return None
        sign, digits, scale = parts
        return Fraction(sign * digits) * Fraction(10) ** scale

    def inexact_reason(self) -> str:
        """Why :meth:`exact` is None, in words for a message ("" when there is an exact value)."""
        if self.text in CONSTANTS or _decimal_parts(self.text) is not None:
            return ""
        if _DECIMAL.fullmatch(self.text) is None or not any(c.isdigit() for c in self.text):
            return f"the constant {self.text} is not a finite number"
        return (f"the constant {_abbreviate(self.text)} has no exact value within {MAX_EXACT_DIGITS} digits "
                f"(float64 holds it as {self.value!r})")


def _decimal_parts(text: str):
    """(sign, digits, scale) with the value sign * digits * 10**scale, for a decimal literal whose exact
    value fits in MAX_EXACT_DIGITS digits; None otherwise. Never builds a large power of ten first."""
    m = _DECIMAL.fullmatch(text)
    if m is None:
        return None
    sign, whole, frac, exp_sign, exp = m.groups()
    frac = frac or ""
    if not (whole or frac):
        return None
    mantissa = (whole + frac).lstrip("0")
    if not mantissa:
        return 1, 0, 0
    stripped = mantissa.rstrip("0")
    exp = (exp or "0").lstrip("0") or "0"
    if len(exp) > 12:  # beyond any digit budget, whatever the mantissa (and int() of it may refuse)
        return None
    scale = (-int(exp) if exp_sign == "-" else int(exp)) - len(frac) + (len(mantissa) - len(stripped))
    # the rational's digits: the mantissa's and, on one side of the fraction bar, the power of ten
    if len(stripped) + abs(scale) > MAX_EXACT_DIGITS:
        return None
    return (-1 if sign == "-" else 1), int(stripped), scale


def _abbreviate(text: str, keep: int = 24) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]}...{text[-keep:]} ({len(text)} characters)"


class Node(NamedTuple):
    op: str  # a primitive name, "var" or "const"
    args: tuple  # indices of the argument nodes, all smaller than this node's own
    attr: object = None  # the variable's name, or a Const


class Graph:
    """An immutable expression DAG with one or more outputs.

    ``variables`` are in order of first appearance, which is the column order of every Jacobian.
    """

    __slots__ = ("nodes", "outputs", "variables", "_active", "_var_nodes", "_last_use")

    def __init__(self, nodes: Iterable[Node], outputs: Iterable[int], variables: Iterable[str]):
        self.nodes = tuple(nodes)
        self.outputs = tuple(outputs)
        self.variables = tuple(variables)
        self._active = None
        self._last_use = None
        self._var_nodes = {n.attr: i for i, n in enumerate(self.nodes) if n.op == "var"}

    def __len__(self):
        return len(self.nodes)

    def __repr__(self):
        return f"Graph({len(self.nodes)} nodes, outputs={self.outputs}, variables={self.variables})"

    def var_node(self, name: str) -> int:
        return self._var_nodes[name]

    def upstream(self, roots) -> "Graph":
        """The graph of what the nodes ``roots`` are computed from, with ``roots`` as its outputs."""
        need = set(roots)
        for i in range(max(need, default=-1), -1, -1):
            if i in need:
                need.update(self.nodes[i].args)
        keep = sorted(need)
        pos = {j: p for p, j in enumerate(keep)}
        nodes = [Node(n.op, tuple(pos[a] for a in n.args), n.attr) for n in (self.nodes[j] for j in keep)]
        return Graph(nodes, [pos[r] for r in roots], self.variables)

    @property
    def active(self) -> tuple:
        """active[i]: node i depends on at least one variable (only those need derivatives)."""
        if self._active is None:
            self._active = tuple(self.depends_on())
        return self._active

    def depends_on(self, names=None, nodes=None) -> list[bool]:
        """depends[i]: node i depends on at least one of the variables ``names`` (None: any variable), or
        with ``nodes``, is or depends on one of those nodes instead."""
        names = None if names is None else set(names)
        roots = None if nodes is None else set(nodes)
        depends: list[bool] = []
        for i, n in enumerate(self.nodes):
            seed = i in roots if roots is not None else n.op == "var" and (names is None or n.attr in names)
            depends.append(seed or any(depends[a] for a in n.args))
        return depends

    @property
    def last_use(self) -> tuple:
        """last_use[i]: the last node that reads node i (outputs live to the end), so loops can free state."""
        if self._last_use is None:
            last = list(range(len(self.nodes)))
            for i, n in enumerate(self.nodes):
                for a in n.args:
                    last[a] = i
            for o in self.outputs:
                last[o] = len(self.nodes)
            self._last_use = tuple(last)
        return self._last_use

    def uses(self) -> list[int]:
        """How many times each node is read (by other nodes, and as an output)."""
        count = [0] * len(self.nodes)
        for n in self.nodes:
            for a in n.args:
                count[a] += 1
        for o in self.outputs:
            count[o] += 1
        return count

    def consumers(self) -> list[list[int]]:
        users = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for a in n.args:
                users[a].append(i)
        return users


class GraphBuilder:
    """Builds a Graph one node at a time; an identical node is created once (hash-consing)."""

    def __init__(self, max_nodes: int = MAX_NODES):
        self.nodes: list[Node] = []
        self._index: dict = {}
        self.variables: list[str] = []
        self.max_nodes = max_nodes

    def _add(self, node: Node) -> int:
        key = node
        if node.op == "const":
            # 0.0 and -0.0 compare equal, as would two texts of one value: key on the text and the bits
            key = ("const", node.attr.text, np.float64(node.attr.value).tobytes())
        found = self._index.get(key)
        if found is not None:
            return found
        if len(self.nodes) >= self.max_nodes:
            raise GraphError(f"expression too large: more than {self.max_nodes} nodes")
        self.nodes.append(node)
        self._index[key] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def var(self, name: str) -> int:
        i = self._add(Node("var", (), name))
        if name not in self.variables:
            self.variables.append(name)
        return i

    def const(self, value: float, text: str | None = None) -> int:
        if text is None:
            text = _float_text(value)
        return self._add(Node("const", (), Const(float(value), text)))

    def apply(self, op: str, *args: int) -> int:
        prim = PRIMITIVES.get(op)
        if prim is None:
            raise GraphError(f"unknown primitive {op!r}")
        if len(args) != prim.arity:
            raise GraphError(f"{op} takes {prim.arity} argument(s), got {len(args)}")
        return self._add(Node(op, tuple(args)))

    def build(self, outputs: Iterable[int], variables: Iterable[str] | None = None) -> Graph:
        return Graph(self.nodes, outputs, self.variables if variables is None else variables)


def _float_text(value: float) -> str:
    value = float(value)
    if not np.isfinite(value):  # folded constants in compiled programs: log(0) is -inf
        return repr(value)
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


# --- the one interpreter and the one reverse sweep -----------------------------------------------------

def _float64_const(i, c):
    return np.float64(c.value)


def walk(graph: Graph, ops, inputs, const=None, perturb=None, observe=None, keep: bool = False) -> list:
    """Every node of ``graph`` through ``ops`` (numbers, arrays, dual numbers, tape variables, graph
    nodes...): the one forward interpreter, a plain loop with its state in a dict.

    ``inputs`` gives each variable's value: a mapping, or a function of the name (called once per
    variable node, in node order). Hooks: ``const(i, c)`` makes constant node i's value from its
    :class:`Const` (default: float64); ``perturb(i, value)`` replaces a computed node's value (one
    more ulp of rounding: see :func:`evaluate`'s ``jiggle``); ``observe(i, value)`` sees every node's
    final value in order. Returns the outputs' values, or with ``keep`` every node's (otherwise a
    value is freed as soon as its last user has read it).
    """
    leaf = inputs if callable(inputs) else inputs.__getitem__
    const = const or _float64_const
    vals: dict[int, object] = {}
    last = None if keep else graph.last_use
    for i, n in enumerate(graph.nodes):
        if n.op == "var":
            v = leaf(n.attr)
        elif n.op == "const":
            v = const(i, n.attr)
        else:
            v = ops.apply(n.op, *(vals[a] for a in n.args))
            if perturb is not None:
                v = perturb(i, v)
        vals[i] = v
        if observe is not None:
            observe(i, v)
        if last is not None:
            for a in set(n.args):
                if last[a] == i:
                    del vals[a]
    if keep:
        return [vals[i] for i in range(len(graph.nodes))]
    return [vals[o] for o in graph.outputs]


def _times(g, p, arg):
    return g * p


def _plus(a, b):
    return a + b


def sweep_back(order, args_of, partial, seeds: dict, mul=_times, add=_plus, observe=None,
               edges: bool = True) -> None:
    """The one reverse sweep: ``adjoint_i += adjoint * partial_i`` from the seeded nodes to the leaves.

    ``order`` lists the nodes (any hashable keys) users first, so a node's adjoint is complete when it is
    reached; ``args_of(node)`` are its arguments and ``partial(node, k)`` the local partial by the k-th
    (None: nothing flows along that edge). ``mul(adjoint, partial, arg)`` and ``add`` make and sum the
    contributions (numbers by default; graph nodes, unbroadcasting arrays...). ``observe(node, adjoint,
    edges)`` sees each reached node once, with its complete adjoint and its edges [(arg, partial,
    contribution)] (None with ``edges`` False); that is where the caller collects what it wants (the
    leaves' adjoints). State is a dict from which each adjoint is dropped once passed on."""
    adjoint = dict(seeds)
    for node in order:
        g = adjoint.pop(node, None)
        if g is None:
            continue
        seen = [] if edges and observe is not None else None
        for k, a in enumerate(args_of(node)):
            p = partial(node, k)
            if p is None:
                continue
            c = mul(g, p, a)
            adjoint[a] = add(adjoint[a], c) if a in adjoint else c
            if seen is not None:
                seen.append((a, p, c))
        if observe is not None:
            observe(node, g, seen)


def graph_sweep(graph: Graph, output: int, partial, seed=1.0, mul=_times, add=_plus, observe=None) -> dict:
    """:func:`sweep_back` over ``graph`` from its output number ``output`` (node indices in reverse
    order) -> {variable name: adjoint} for the variables reached. ``partial(i, k)`` as there."""
    nodes = graph.nodes
    o = graph.outputs[output]
    found: dict = {}

    def seen(i, g, edges):
        if nodes[i].op == "var":
            found[nodes[i].attr] = g
        if observe is not None:
            observe(i, g, edges)

    sweep_back(range(o, -1, -1), lambda i: nodes[i].args, partial, {o: seed}, mul, add, seen,
               edges=observe is not None)
    return found


def evaluate(graph: Graph, inputs: dict, xp=np, dtype=None, jiggle=None) -> list:
    """Values of the outputs for ``inputs`` (name -> number or array; arrays broadcast together).

    Only evaluates: the numerical methods use this, never the partials. With ``jiggle`` (numpy only:
    ``jiggle(i)`` gives +1/-1 values that broadcast with the inputs, for node i), every operation's
    result gets one extra rounding error of one ulp in that direction, so that comparing with a plain
    evaluation shows how much rounding the result carries.
    """
    const = None if dtype is None else (lambda i, c: xp.asarray(c.value, dtype=dtype))
    perturb = None
    if jiggle is not None:
        perturb = lambda i, v: v * (1 + _EPS * jiggle(i))
        # an inexact constant (0.1, pi) carries its representation error as an operation does its rounding
        plain = const or _float64_const
        const = lambda i, c: plain(i, c) if c.exact() == c.value else plain(i, c) * (1 + _EPS * jiggle(i))
    return walk(graph, NumericOps(xp), inputs, const=const, perturb=perturb)


_EPS = np.finfo(np.float64).eps


def node_values(graph: Graph, inputs: dict, xp=np, ops=None) -> list:
    """The value of every node (kept, not freed): for diagnostics and explanations, or, with other
    ``ops`` (tape variables, dual numbers), to record a tape over the whole graph."""
    return walk(graph, ops or NumericOps(xp), inputs, keep=True)


#: The infix operators of the expression language, by primitive: how a node is written back as text.
INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
_PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2, "neg": 3, "pow": 4}
_ATOM = 5


class _TextOps:
    """Primitives on (text, precedence) pairs: a node written back in the expression language, with the
    parentheses its precedence needs (``walk`` with these ops is :func:`text_of`)."""

    def apply(self, name, *args):
        prec = _PRECEDENCE.get(name, _ATOM)
        if name in INFIX:
            (a, pa), (b, pb) = args
            right_assoc = name == "pow"
            a = a if pa > prec or (pa == prec and not right_assoc) else f"({a})"
            b = b if pb > prec or (pb == prec and right_assoc) else f"({b})"
            return f"{a} {INFIX[name]} {b}" if prec < 4 else f"{a}**{b}", prec
        if name == "neg":
            (a, pa), = args
            return f"-{a}" if pa > prec else f"-({a})", prec
        return f"{name}({', '.join(a for a, _ in args)})", _ATOM


def text_of(graph: Graph, i: int, limit: int = 60) -> str:
    """Node ``i`` of ``graph`` as an expression (``1 - cos(x)``), cut to ``limit`` characters."""
    sub = graph.upstream([i])
    text, _ = walk(sub, _TextOps(), lambda name: (name, _ATOM),
                   const=lambda j, c: (c.text, _ATOM if not c.text.startswith("-") else 3))[0]
    return text if len(text) <= limit else text[:limit - 1] + "…"
