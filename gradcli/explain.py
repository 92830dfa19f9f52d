"""``gradcli explain``: how each method reaches its derivative, step by step, as plain data.

One :class:`Explanation` holds everything the command shows: the graph as a tree (each node expanded
once, a later use is a reference to it), the forward trace as a Wengert list with the tangent along one
direction, the reverse sweep per output (each node's adjoint, each edge's local partial and
contribution, and how a node used several times sums its contributions), sympy's derivative, and how
central differences and Richardson extrapolation made their estimates. The cap is applied here, not
in the renderer, so that ``--json`` and the table show the same content.

The tangents and adjoints are not re-derived here: forward mode's sweep and reverse mode's sweeps run
as they do for ``gradcli grad``, and this module only observes each of their steps through the hooks
of the one interpreter and the one reverse sweep; the numerical sections only read what
:mod:`gradcli.methods.numeric` recorded in its ``detail``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.verdict.diagnose import diagnose
from gradcli.core.graph import INFIX, Graph
from gradcli.methods import forward, numeric, reverse, symbolic
from gradcli.methods.forward import Dual, split
from gradcli.render.json import plain
from gradcli.verdict.exit_codes import EXIT_OK, EXIT_UNDEFINED

#: Above this many nodes, lists show their first and last HEAD/TAIL entries and the tree stops at
#: TREE_DEPTH levels and TREE_ROWS rows; ``cap=None`` (``--all``) lifts every limit.
CAP = 60
HEAD = TAIL = 20
TREE_DEPTH = 8
TREE_ROWS = 60
MAX_TEXT = 400  # characters of one symbolic derivative, when capped
MAX_ENTRIES = 6  # finite-difference entries (output, variable) explained, when capped
MAX_SWEEPS = 3  # outputs whose reverse sweep is shown, when capped
RIDDERS_EXTRA_COLUMNS = 1  # columns of the tableau shown beyond the chosen one


@dataclass
class Gap:
    """Entries left out of a capped list."""

    gap: int


@dataclass
class TreeRow:
    depth: int
    kind: str  # node | shared (a reference to a node expanded above) | elided (deeper levels cut)
    node: int | None
    text: str
    output: int | None = None  # which output this row is the root of
    uses: int = 1  # how many times the node is used (arguments and outputs)


@dataclass
class Step:
    """One line of the Wengert list: v<node> = text, its value and tangent."""

    node: int
    label: str
    op: str  # a primitive, "var" or "const"
    args: list
    text: str
    value: float
    tangent: float


@dataclass
class Edge:
    to: int
    label: str
    partial: float
    contribution: float


@dataclass
class SweepRow:
    node: int
    label: str
    text: str
    adjoint: float
    edges: list = field(default_factory=list)
    sources: list = field(default_factory=list)  # [{"from": node, "label", "contribution"}], summed


@dataclass
class Sweep:
    output: int
    node: int
    rows: list  # SweepRow and Gap, in reverse node order
    gradient: dict  # variable -> adjoint of its node


@dataclass
class CentralEntry:
    output: int
    variable: str
    chosen: int  # index into candidates
    step: float
    estimate: float
    error: float
    candidates: list  # [{"index", "h", "estimate", "error"}] as tried, largest scale first


@dataclass
class RichardsonEntry:
    output: int
    variable: str
    h0: float
    ratio: float
    rows: list  # [{"row", "h", "columns": [D(h), extrapolations...]}]
    chosen_row: int
    chosen_column: int
    estimate: float
    error: float
    stopped_row: int


@dataclass
class Explanation:
    """Everything ``gradcli explain`` shows; ``to_dict()`` is its ``--json`` document."""

    expression: str
    variables: list
    point: dict
    values: list
    nodes: int
    capped: bool
    cap: int | None
    tangent: dict
    tree: list
    tree_omitted: int
    wengert: list
    directional: list  # the outputs' tangents: the directional derivative along ``tangent``
    sweeps: list
    sweeps_omitted: int
    symbolic: dict
    central: dict
    richardson: dict
    diagnostics: list
    notes: list = field(default_factory=list)

    @property
    def status(self) -> str:
        kinds = {d.kind for d in self.diagnostics}
        return "undefined" if "undefined" in kinds else "nondifferentiable" if kinds else "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_OK if not self.diagnostics else EXIT_UNDEFINED

    def to_dict(self) -> dict:
        """The ``gradcli explain --json`` document: plain data, null for every non-finite number. As in
        ``gradcli grad --json``, ``value``, ``directional_derivative`` and the symbolic derivatives are
        lists (one per output) only for a vector-valued expression."""
        one = (lambda xs: xs[0] if xs is not None and len(self.values) == 1 else xs)
        sym = dict(self.symbolic, derivatives=one(self.symbolic["derivatives"]))
        doc = {"expression": self.expression, "variables": list(self.variables),
               "point": self.point, "value": one(self.values), "nodes": self.nodes, "capped": self.capped,
               "cap": self.cap, "notes": self.notes, "tangent": self.tangent,
               "tree": self.tree, "tree_omitted": self.tree_omitted, "wengert": self.wengert,
               "directional_derivative": one(self.directional), "reverse": self.sweeps,
               "reverse_omitted": self.sweeps_omitted, "symbolic": sym, "central": self.central,
               "richardson": self.richardson,
               "diagnostics": [{"kind": d.kind, "op": d.op, "message": d.message} for d in self.diagnostics],
               "status": self.status}
        return plain(doc)


def label(i: int) -> str:
    return f"v{i}"


def node_text(graph: Graph, i: int) -> str:
    """``v0 * v1``, ``sin(v2)``, or a variable's name / a constant's text."""
    n = graph.nodes[i]
    if n.op == "var":
        return n.attr
    if n.op == "const":
        return n.attr.text
    args = [label(a) for a in n.args]
    if n.op in INFIX:
        return f"{args[0]} {INFIX[n.op]} {args[1]}"
    if n.op == "neg":
        return f"-{args[0]}"
    return f"{n.op}({', '.join(args)})"


def _head_tail(items: list, capped: bool) -> list:
    if not capped or len(items) <= HEAD + TAIL:
        return items
    return items[:HEAD] + [Gap(len(items) - HEAD - TAIL)] + items[-TAIL:]


def build_tree(graph: Graph, capped: bool) -> tuple[list, int]:
    """Pre-order rows from each output down (an explicit stack, no recursion): a node is expanded the
    first time it is reached; every later use is a ``shared`` row referring to it. When ``capped``,
    levels below TREE_DEPTH become one ``elided`` row and the walk stops after TREE_ROWS rows.
    -> (rows, nodes never shown)."""
    uses = graph.uses()
    expanded: set = set()
    shown: set = set()
    rows: list = []
    stack = [(o, 0, k) for k, o in reversed(list(enumerate(graph.outputs)))]
    while stack:
        if capped and len(rows) >= TREE_ROWS:
            break
        i, depth, out = stack.pop()
        n = graph.nodes[i]
        text = f"{label(i)} = {node_text(graph, i)}"
        if i in expanded:
            rows.append(TreeRow(depth, "shared", i, f"↑ {text} (shared)", out, uses[i]))
            continue
        rows.append(TreeRow(depth, "node", i, text, out, uses[i]))
        shown.add(i)
        if not n.args:
            expanded.add(i)
            continue
        if capped and depth + 1 >= TREE_DEPTH:
            rows.append(TreeRow(depth + 1, "elided", None, f"… deeper levels of {label(i)} not shown"))
            continue
        expanded.add(i)
        stack.extend((a, depth + 1, None) for a in reversed(n.args))
    return rows, len(graph.nodes) - len(shown)


def forward_trace(graph: Graph, x: dict, direction: dict) -> tuple[list, list]:
    """Forward mode's own sweep (:func:`gradcli.methods.forward.sweep`) seeded with ``direction``,
    observed node by node -> (values, tangents) of every node (tangent 0 where none flows)."""
    vals: list = []
    tangents: list = []

    def seen(i, d):
        v, t = split(d)
        vals.append(v)
        # +0.0: a direction's zero components contribute -0.0 terms; the tangent shown is 0
        tangents.append(np.float64(0.0) if t is None else np.float64(t) + 0.0)

    seeds = {v: Dual(x[v], np.float64(direction[v])) for v in graph.variables}
    forward.sweep(graph, seeds, observe=seen)
    return vals, tangents


def reverse_trace(graph: Graph, x: dict, shown: int, capped: bool) -> list:
    """Reverse mode's own sweeps (:func:`gradcli.methods.reverse.jacobian`), observed: one
    :class:`Sweep` for each of the first ``shown`` outputs. Each row is a node reached, in reverse
    node order, with its complete adjoint; each edge passes adjoint * partial to an argument, and a
    node reached along several edges sums the contributions (its ``sources``)."""
    rows: list = [[] for _ in range(shown)]
    sources: list = [{} for _ in range(shown)]
    gradient: list = [{} for _ in range(shown)]

    def seen(r, i, g, edges):
        if r >= shown:
            return
        out = []
        for a, p, c in edges:
            sources[r].setdefault(a, []).append({"from": i, "label": label(i), "contribution": c})
            out.append(Edge(a, label(a), np.float64(p), c))
        rows[r].append(SweepRow(i, label(i), node_text(graph, i), g, out, sources[r].get(i, [])))
        if graph.nodes[i].op == "var":
            gradient[r][graph.nodes[i].attr] = g

    reverse.jacobian(graph, x, observe=seen)
    sweeps = []
    for r in range(shown):
        o = graph.outputs[r]
        if not rows[r]:  # a constant output: its seed goes nowhere
            rows[r].append(SweepRow(o, label(o), node_text(graph, o), np.float64(1.0)))
        grad = {v: gradient[r].get(v, np.float64(0.0)) for v in graph.variables}
        sweeps.append(Sweep(r, o, _head_tail(rows[r], capped), grad))
    return sweeps


def _symbolic(graph: Graph, timeout, capped: bool) -> dict:
    res = symbolic.derivatives(graph, timeout)
    if res.status != "ok":
        return {"status": res.status, "message": res.message, "derivatives": None}
    cut = lambda s: s if not capped or len(s) <= MAX_TEXT else s[:MAX_TEXT] + f" … ({len(s)} chars)"
    return {"status": "ok", "message": "",
            "derivatives": [dict(zip(graph.variables, (cut(s) for s in row))) for row in res.text]}


def _entries(graph: Graph, capped: bool) -> list:
    pairs = [(o, k) for o in range(len(graph.outputs)) for k in range(len(graph.variables))]
    return pairs[:MAX_ENTRIES] if capped else pairs


def _central(graph: Graph, point: dict, pairs: list) -> dict:
    res = numeric.central(graph, point)
    d = res.detail
    entries = []
    for o, k in pairs:
        # the candidates this entry's step selection tried: the first pass's two, or all of them
        tried = [j for j in range(d["candidate_steps"].shape[0]) if np.isfinite(d["candidate_steps"][j, k])]
        cands = [{"index": j, "h": d["candidate_steps"][j, k], "estimate": d["candidate_estimates"][j, o, k],
                  "error": d["candidate_errors"][j, o, k]} for j in tried]
        c = tried.index(int(d["chosen"][o, k]))
        entries.append(CentralEntry(o, graph.variables[k], c, cands[c]["h"], cands[c]["estimate"],
                                    cands[c]["error"], cands))
    return {"status": res.status, "message": res.message, "entries": entries}


def _richardson(graph: Graph, point: dict, pairs: list) -> dict:
    res = numeric.richardson(graph, point)
    d = res.detail
    entries = []
    for o, k in pairs:
        ci, cj, stop = int(d["chosen_row"][o, k]), int(d["chosen_column"][o, k]), int(d["stopped_row"][o, k])
        last_col = cj + RIDDERS_EXTRA_COLUMNS if cj >= 0 else 2
        rows = [{"row": i, "h": res.steps[i, k],
                 "columns": [d["tableau"][i][j][o, k] for j in range(min(i, last_col) + 1)]}
                for i in range(stop + 1)]
        entries.append(RichardsonEntry(o, graph.variables[k], d["h0"][k], d["ratio"], rows, ci, cj,
                                       res.jacobian[o, k], res.error[o, k], stop))
    return {"status": res.status, "message": res.message, "entries": entries}


def parse_tangent(graph: Graph, tangent) -> dict:
    """None -> the first variable's unit vector; a dict by name (unnamed: 0) or a sequence in variable
    order -> {variable: component}."""
    names = graph.variables
    if tangent is None:
        return {v: (1.0 if k == 0 else 0.0) for k, v in enumerate(names)}
    if isinstance(tangent, dict):
        return {v: float(tangent.get(v, 0.0)) for v in names}
    return {v: float(c) for v, c in zip(names, tangent)}


def explain(graph: Graph, point: dict, tangent=None, cap: int | None = CAP, expression: str = "",
            timeout: float | None = symbolic.DEFAULT_TIMEOUT) -> Explanation:
    """Explain every method at ``point``; ``tangent`` (see :func:`parse_tangent`) is the forward
    direction. With more than ``cap`` nodes the lists are cut to their ends (``cap=None``: no cap)."""
    capped = cap is not None and len(graph.nodes) > cap
    direction = parse_tangent(graph, tangent)
    x = {k: np.float64(v) for k, v in point.items()}
    with np.errstate(all="ignore"):
        diags, _, _ = diagnose(graph, point)
        vals, tangents = forward_trace(graph, x, direction)
        wengert = [Step(i, label(i), n.op, list(n.args), node_text(graph, i), vals[i], tangents[i])
                   for i, n in enumerate(graph.nodes)]
        shown = len(graph.outputs) if not capped else min(MAX_SWEEPS, len(graph.outputs))
        sweeps = reverse_trace(graph, x, shown, capped)
        pairs = _entries(graph, capped)
        central = _central(graph, point, pairs)
        richardson = _richardson(graph, point, pairs)
    tree, tree_omitted = build_tree(graph, capped)
    notes = []
    if capped:
        notes.append(f"{len(graph.nodes)} nodes: more than {cap}, so lists show their first {HEAD} and last "
                     f"{TAIL} entries and the tree stops at depth {TREE_DEPTH} or {TREE_ROWS} rows; "
                     "--all shows everything")
        n_pairs = len(graph.outputs) * len(graph.variables)
        if n_pairs > len(pairs):
            notes.append(f"finite differences: {len(pairs)} of {n_pairs} entries explained")
    if not graph.variables:
        notes.append("the expression has no variables: there is nothing to differentiate")
    sweeps_omitted = len(graph.outputs) - len(sweeps)
    if sweeps_omitted:
        notes.append(f"reverse sweep: {len(sweeps)} of {len(graph.outputs)} outputs shown")
    return Explanation(
        expression=expression, variables=list(graph.variables), point=dict(point),
        values=[vals[o] for o in graph.outputs], nodes=len(graph.nodes), capped=capped, cap=cap,
        tangent=direction, tree=tree, tree_omitted=tree_omitted, wengert=_head_tail(wengert, capped),
        directional=[tangents[o] for o in graph.outputs], sweeps=sweeps, sweeps_omitted=sweeps_omitted,
        symbolic=_symbolic(graph, timeout, capped), central=central, richardson=richardson,
        diagnostics=diags, notes=notes)
