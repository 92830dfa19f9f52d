"""Where a point is not ordinary: outside a domain (undefined) or on a kink (nondifferentiable).

One diagnosis serves a point, a batch chunk and a plotted grid (a point is N = 1):
:func:`diagnose_points` walks the graph once (:func:`gradcli.core.graph.walk`) with :class:`DiagnosisOps`,
which evaluates each operation and checks the table's ``domain``, ``smooth`` and ``kink`` predicates
elementwise, and also catches what no predicate names (overflow, a partial that is not finite). It
returns, per point, which (output, variable) entries of the Jacobian a problem makes meaningless: a
kink in ``abs(x)`` does not spoil d/dy of ``abs(x) + y``. :func:`diagnose` (one point, with messages
that show the arguments) and :func:`diagnose_batch` (counts per reason) only word what it found.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.graph import Graph, node_values, walk
from gradcli.methods.forward import Dual, DualOps, split
from gradcli.core.primitives import PRIMITIVES, NumericOps, Ops
from gradcli.methods.extended_range import EXTENDED
from gradcli.verdict.report import Diagnostic

_WIDE = NumericOps(np)


def _fmt(v) -> str:
    # 6 digits where they say it, every digit where they would not: pow(1, 1e+100) hides that the base
    # is 1.0000001
    short = f"{float(v):.6g}"
    return short if float(short) == float(v) else repr(float(v))


def _call(op, vals) -> str:
    return f"{op}({', '.join(_fmt(v) for v in vals)})"


def variable_masks(graph: Graph) -> list[int]:
    """Bit k of masks[i] is set when node i depends on variable k."""
    index = {v: k for k, v in enumerate(graph.variables)}
    masks: list[int] = []
    for n in graph.nodes:
        m = 1 << index[n.attr] if n.op == "var" else 0
        for a in n.args:
            m |= masks[a]
        masks.append(m)
    return masks


def output_masks(graph: Graph) -> list[int]:
    """Bit j of masks[i] is set when output j depends on node i."""
    masks = [0] * len(graph.nodes)
    for j, o in enumerate(graph.outputs):
        masks[o] |= 1 << j
    for i in range(len(graph.nodes) - 1, -1, -1):
        for a in graph.nodes[i].args:
            masks[a] |= masks[i]
    return masks


class DiagnosisOps(Ops):
    """Primitives on ``xp`` that also check, elementwise, where each result is not ordinary: ``checks``
    holds the last operation's (args, domain, overflow, kink, smooth, [partial per argument]) masks,
    each point counted under the first of them that fails (a point outside the domain is not also on a
    kink). Arguments that are not all finite are not judged: the problem is where they went wrong."""

    def __init__(self, xp, N: int):
        self.xp, self.N = xp, N
        self.numeric = NumericOps(xp)
        self.checks = None

    def _full(self, b):
        if isinstance(b, (bool, np.bool_)):  # known here: no array to read it from
            return self.xp.full(self.N, bool(b))
        a = self.xp.asarray(b, dtype=bool)
        if a.shape == (self.N,):
            return a
        if a.size == 1:  # one point (grad at --at), or a value the points share
            return a.reshape(1) if self.N == 1 else self.xp.broadcast_to(a.reshape(()), (self.N,))
        return self.xp.broadcast_to(a, (self.N,))

    def apply(self, name, *args):
        xp, full = self.xp, self._full
        prim = PRIMITIVES[name]
        v = prim.value(xp, *args)
        live = full(True)
        for a in args:
            live = live & full(xp.isfinite(a))
        found = []
        for test in (None if prim.domain is None else (lambda: ~full(prim.domain(xp, *args))),
                     lambda: ~full(xp.isfinite(v)),
                     None if prim.kink is None else (lambda: full(prim.kink(xp, *args))),
                     None if prim.smooth is None else (lambda: ~full(prim.smooth(xp, *args)))):
            bad = full(False) if test is None else live & test()
            found.append(bad)
            live = live & ~bad
        partial = [live & ~full(self._finite(prim, rule, v, args)) for rule in prim.partials]
        self.checks = (args, *found, partial)
        return v

    def _finite(self, prim, rule, v, args):
        """Whether the local partial is finite: on the host, a partial that overflows float64 but is
        finite in the extended type (d(1/z)/dz = -1e320 at z = 1e-160) is finite; the derivative through
        it may well be (d atan(1/z)/dz = -1), and the AD methods compute it in that type where needed."""
        xp = self.xp
        with np.errstate(all="ignore"):
            finite = xp.isfinite(rule(self.numeric, v, *args))
            if xp is not np or EXTENDED is None or np.all(finite):
                return finite
            wide = [np.asarray(a, dtype=EXTENDED) for a in args]
            try:
                return finite | np.isfinite(rule(_WIDE, prim.value(np, *wide), *wide))
            except (TypeError, ValueError):  # no long double loop for this primitive: as float64 says
                return finite


#: what each check means: (kind, the point's message, the batch's message), by the check's position
_PROBLEMS = (
    ("undefined", lambda op, prim, call: f"{call} is undefined"
     + (f" (its domain is {prim.domain_text})" if prim.domain_text else ""),
     lambda op, prim: f"outside the domain of {op} ({prim.domain_text})"),
    ("undefined", lambda op, prim, call: f"{call} is not finite in float64 (overflow)",
     lambda op, prim: f"{op} is not finite (overflow)"),
    ("nondifferentiable", lambda op, prim, call: f"{call} sits on a kink of {op}",
     lambda op, prim: f"on a kink of {op}"),
    ("undefined", lambda op, prim, call: f"the derivative of {op} does not exist at {call}"
     + (f" (it needs {prim.smooth_text})" if prim.smooth_text else ""),
     lambda op, prim: f"the derivative of {op} does not exist ({prim.smooth_text})"),
    ("undefined", lambda op, prim, call: f"the derivative of {op} is not finite at {call}",
     lambda op, prim: f"the derivative of {op} is not finite"),
)


def diagnose_points(graph: Graph, inputs: dict, xp=np, dtype=np.float64, n: int | None = None, report=None,
                    wrt=None, overflow: bool = True):
    """The one diagnosis, over N points at once (a point is N = 1): the table's domain, smooth and kink
    predicates and the finiteness of every value and local partial, elementwise, in one walk of the
    graph. ``inputs``: name -> value or 1-D array of the points, in ``dtype``.

    -> (bad_value (outputs, N), bad_deriv (outputs, variables, N)); a problem spoils the value and every
    derivative of the outputs that read it when it is the value's, else only the derivatives by the
    variables it depends on. ``report(i, p, mask, args)`` hears of every check at node i, found or not:
    ``p`` indexes :data:`_PROBLEMS`, ``mask`` says at which points it failed (the masks of one node
    exclude each other). ``wrt`` (default: every variable) names the variables that are differentiated:
    the others are constants, so kinks and partials along them do not count. ``overflow`` False: a value
    that overflows is not a problem in itself (a plot draws what float64 computes, 1/exp(x) = 0 at
    x = -1000; a verdict must not trust it).
    Nothing is read back from the arrays (on a GPU that would wait for it at every node): the masks are
    gathered by the outputs and variables their nodes reach, and spread over the entries once at the end.
    """
    N = n if n is not None else (len(next(iter(inputs.values()))) if inputs else 1)
    var_masks, out_masks = variable_masks(graph), output_masks(graph)
    active = graph.active if wrt is None else graph.depends_on(wrt)
    ops = DiagnosisOps(xp, N)
    value_by, deriv_by = {}, {}  # bad values by the outputs a node reaches; bad derivatives by (outputs, variables)

    def check(i, v):
        node = graph.nodes[i]
        if node.op in ("var", "const"):
            return
        args, dom, over, kink, rough, partial = ops.checks
        if not overflow:
            over = xp.zeros(N, dtype=bool)
        value_bad = dom | over
        problems = [dom, over]
        if active[i]:
            inf = xp.zeros(N, dtype=bool)
            for mask, a in zip(partial, node.args):
                if active[a]:
                    inf = inf | mask
            problems += [kink, rough, inf]
        deriv_bad = value_bad
        for p, mask in enumerate(problems):
            if p >= 2:
                deriv_bad = deriv_bad | mask
            if report is not None:
                report(i, p, mask, args)
        key = out_masks[i], var_masks[i]
        value_by[key[0]] = value_bad | value_by[key[0]] if key[0] in value_by else value_bad
        deriv_by[key] = deriv_bad | deriv_by[key] if key in deriv_by else deriv_bad

    with np.errstate(all="ignore"):
        walk(graph, ops, inputs, const=lambda i, c: dtype(c.value), observe=check)
    return _spread(graph, xp, N, value_by, deriv_by)


def _spread(graph: Graph, xp, N: int, value_by: dict, deriv_by: dict):
    """The gathered masks over the entries: an output's value is bad where a node it reads is; its
    derivative by a variable also where a node that depends on that variable has a bad derivative."""
    m, nv = len(graph.outputs), len(graph.variables)
    bad_value = xp.zeros((m, N), dtype=bool)
    bad_deriv = xp.zeros((m, nv, N), dtype=bool)
    for outs, mask in value_by.items():
        for j in range(m):
            if outs >> j & 1:
                bad_value[j] |= mask
    for j in range(m):
        bad_deriv[j] |= bad_value[j]
    for (outs, var), mask in deriv_by.items():
        for j in range(m):
            for k in range(nv):
                if outs >> j & 1 and var >> k & 1:
                    bad_deriv[j, k] |= mask
    return bad_value, bad_deriv


@dataclass
class Tally:
    """The problems a batch chunk met, counted where its arrays are: ``keys`` (kind, op, text) per
    check in the order met, ``counts`` an array (checks, 2) of how many points failed it and the
    first of them. :meth:`reasons` reads it once it is on the host."""

    keys: list
    counts: object

    def reasons(self, counts) -> dict:
        """``counts`` (:attr:`counts` on the host) -> {(kind, op, text): (count, first index)}, in the order
        first met; a key met at several nodes adds their counts and keeps the first node's point."""
        found: dict = {}
        for key, (count, first) in zip(self.keys, counts.tolist()):
            if count:
                c, f = found.get(key, (0, int(first)))
                found[key] = (c + int(count), f)
        return found


def diagnose_batch(graph: Graph, inputs: dict, xp, dtype, n: int | None = None):
    """:func:`diagnose_points` over a batch chunk, the problems counted by kind, function and reason
    -> (bad_value (m, N), bad_deriv (m, nvars, N), :class:`Tally`)."""
    keys, counts, firsts = [], [], []

    def report(i, p, mask, args):
        op = graph.nodes[i].op
        kind, _, text = _PROBLEMS[p]
        keys.append((kind, op, text(op, PRIMITIVES[op])))
        counts.append(xp.count_nonzero(mask))
        firsts.append(xp.argmax(mask))

    bad_value, bad_deriv = diagnose_points(graph, inputs, xp, dtype, n, report)
    tally = xp.stack([xp.stack(counts), xp.stack(firsts)], axis=1) if keys else xp.zeros((0, 2), dtype=np.int64)
    return bad_value, bad_deriv, Tally(keys, tally)


def diagnose(graph: Graph, point: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """Problems at ``point`` -> (diagnostics, bad_value[output], bad_derivative[output, variable])."""
    found: list = []

    def report(i, p, mask, args):
        if mask[0]:
            op = graph.nodes[i].op
            kind, text, _ = _PROBLEMS[p]
            found.append(Diagnostic(kind, op, text(op, PRIMITIVES[op], _call(op, args))))

    bad_value, bad_deriv = diagnose_points(graph, {k: np.float64(v) for k, v in point.items()}, n=1,
                                           report=report)
    return found, bad_value[:, 0], bad_deriv[:, :, 0]


def diagnose_hessian(graph: Graph, point: dict) -> tuple[list, bool, np.ndarray, np.ndarray]:
    """Problems for the Hessian of a scalar expression
    -> (diagnostics, bad_value, bad_gradient[variable], bad_hessian[variable, variable]).

    Everything :func:`diagnose` finds spoils the Hessian entries of the variables it touches, in either
    position. A kink anywhere on a differentiated path counts, even where the function happens to be
    twice differentiable (``abs(x)**3`` at 0): the methods differentiate the partials, and ``sign``'s
    jump is exactly where they cannot. Beyond that, a second derivative may fail to exist where the
    first does (``x**1.5`` at 0: 0.75/sqrt(x)); the partial rules differentiated by dual numbers say
    so, and the point is ``undefined`` for the Hessian.
    """
    found, bad_value, bad_deriv = diagnose(graph, point)
    nvar = len(graph.variables)
    var_masks = variable_masks(graph)
    bad_grad = np.array(bad_deriv[0])
    bad_vars = bad_grad.copy()
    if bad_value.any():
        return found, True, bad_grad, np.ones((nvar, nvar), dtype=bool)
    dual = DualOps()
    active = graph.active
    with np.errstate(all="ignore"):
        vals = node_values(graph, {k: np.float64(v) for k, v in point.items()})
        for i, n in enumerate(graph.nodes):
            if n.op in ("var", "const") or not active[i]:
                continue
            if any(var_masks[i] >> k & 1 and bad_vars[k] for k in range(nvar)):
                continue  # the first-order diagnosis already covers this node
            args = [vals[a] for a in n.args]
            live = [k for k, a in enumerate(n.args) if active[a]]
            for k in live:
                if not _second_partials_finite(dual, n.op, k, args, live):
                    found.append(Diagnostic("undefined", n.op, f"the second derivative of {n.op} does not exist "
                                                               f"at {_call(n.op, args)}"))
                    for b in range(nvar):
                        bad_vars[b] |= bool(var_masks[i] >> b & 1)
                    break
    return found, False, bad_grad, bad_vars[:, None] | bad_vars[None, :]


def _second_partials_finite(dual, op: str, k: int, args: list, live: list, wide: bool = False) -> bool:
    """Whether the derivatives of ``op``'s k-th partial along each active argument are finite at ``args``:
    the partial rules differentiated by dual numbers; one that overflows float64 but is finite in the
    extended type (d²(1/z)/dz² = 2e480 at z = 1e-160) is finite, as at first order."""
    kind = EXTENDED if wide else np.float64
    # tangents along each active argument: the partials' own derivatives are the second partials
    duals = [dual.apply("add", kind(0.0), _seed(v, j, live, kind)) if j in live else v for j, v in enumerate(args)]
    with np.errstate(all="ignore"):
        _, t = split(PRIMITIVES[op].partials[k](dual, dual.apply(op, *duals), *duals))
    if t is None or np.all(np.isfinite(t)):
        return True
    return not wide and EXTENDED is not None and _second_partials_finite(dual, op, k, args, live, wide=True)


def _seed(value, k, live, kind=np.float64):
    t = np.zeros(len(live), dtype=kind)
    t[live.index(k)] = 1.0
    return Dual(kind(value), t)
