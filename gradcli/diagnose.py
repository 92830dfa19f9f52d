"""Where a point is not ordinary: outside a domain (undefined) or on a kink (nondifferentiable).

The check walks the graph once with the table's ``domain``, ``smooth`` and ``kink`` predicates, and
also catches what no predicate names (overflow, a partial that is not finite). It returns, for each
problem, which (output, variable) entries of the Jacobian it makes meaningless: a kink in ``abs(x)``
does not spoil d/dy of ``abs(x) + y``.
"""
from __future__ import annotations

import numpy as np

from .graph import Graph, node_values
from .methods.forward import Dual, DualOps, split
from .primitives import PRIMITIVES, NumericOps
from .report import Diagnostic


def _fmt(v) -> str:
    return f"{float(v):.6g}"


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


def diagnose(graph: Graph, point: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """Problems at ``point`` -> (diagnostics, bad_value[output], bad_derivative[output, variable])."""
    with np.errstate(all="ignore"):
        vals = node_values(graph, {k: np.float64(v) for k, v in point.items()})
    ops = NumericOps()
    nout, nvar = len(graph.outputs), len(graph.variables)
    bad_value = np.zeros(nout, dtype=bool)
    bad_deriv = np.zeros((nout, nvar), dtype=bool)
    found: list = []
    var_masks = variable_masks(graph)
    out_masks = None

    def mark(i, kind, message, value_too):
        nonlocal out_masks
        if out_masks is None:
            out_masks = output_masks(graph)
        found.append(Diagnostic(kind, graph.nodes[i].op, message))
        for j in range(nout):
            if out_masks[i] >> j & 1:
                bad_value[j] |= value_too
                for k in range(nvar):
                    if value_too or var_masks[i] >> k & 1:
                        bad_deriv[j, k] = True

    active = graph.active
    with np.errstate(all="ignore"):
        for i, n in enumerate(graph.nodes):
            if n.op in ("var", "const"):
                continue
            prim = PRIMITIVES[n.op]
            args = [vals[a] for a in n.args]
            if not all(np.isfinite(args)):
                continue  # reported where it first went wrong
            where = f" (its domain is {prim.domain_text})" if prim.domain_text else ""
            if prim.domain is not None and not bool(prim.domain(np, *args)):
                mark(i, "undefined", f"{_call(n.op, args)} is undefined{where}", True)
                continue
            if not np.isfinite(vals[i]):
                mark(i, "undefined", f"{_call(n.op, args)} is not finite in float64 (overflow)", True)
                continue
            if not active[i]:
                continue
            if prim.kink is not None and bool(prim.kink(np, *args)):
                mark(i, "nondifferentiable", f"{_call(n.op, args)} sits on a kink of {n.op}", False)
                continue
            if prim.smooth is not None and not bool(prim.smooth(np, *args)):
                need = f" (it needs {prim.smooth_text})" if prim.smooth_text else ""
                mark(i, "undefined", f"the derivative of {n.op} does not exist at {_call(n.op, args)}{need}",
                     False)
                continue
            for rule, a in zip(prim.partials, n.args):
                if active[a] and not np.all(np.isfinite(rule(ops, vals[i], *args))):
                    mark(i, "undefined", f"the derivative of {n.op} is not finite at {_call(n.op, args)}", False)
                    break
    return found, bad_value, bad_deriv


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
            prim = PRIMITIVES[n.op]
            args = [vals[a] for a in n.args]
            live = [k for k, a in enumerate(n.args) if active[a]]
            # tangents along each active argument: the partials' own derivatives are the second partials
            duals = [dual.apply("add", np.float64(0.0), _seed(v, k, live)) if k in live else v
                     for k, v in enumerate(args)]
            ans = dual.apply(n.op, *duals)
            for k in live:
                p = prim.partials[k](dual, ans, *duals)
                _, t = split(p)
                if t is not None and not np.all(np.isfinite(t)):
                    found.append(Diagnostic("undefined", n.op, f"the second derivative of {n.op} does not exist "
                                                               f"at {_call(n.op, args)}"))
                    for b in range(nvar):
                        bad_vars[b] |= bool(var_masks[i] >> b & 1)
                    break
    return found, False, bad_grad, bad_vars[:, None] | bad_vars[None, :]


def _seed(value, k, live):
    t = np.zeros(len(live))
    t[live.index(k)] = 1.0
    return Dual(np.float64(value), t)


def straddles(graph: Graph, inputs: dict, k: int, reach, xp, dtype, N):
    """Per point: does moving variable k by up to +-``reach`` cross a pole, jump or kink of the table
    (a switching function changes sign between the point and either end)? There a difference quotient
    measures an average of two sides, not the derivative: near min(x, 2) in float32 it returns 0.5."""
    switched = [i for i, node in enumerate(graph.nodes) if node.op in PRIMITIVES and PRIMITIVES[node.op].switch]
    hit = xp.zeros(N, dtype=bool)
    if not switched:
        return hit
    name = graph.variables[k]
    moved = dict(inputs)
    x = inputs[name]
    # the point, then both ends at reach, reach/2, reach/4: a switch that flips twice within the
    # reach (tan of a fast-growing argument) still shows at some level
    levels = [x] + [x + sign * reach / 2 ** j for j in range(3) for sign in (-1, 1)]
    moved[name] = xp.stack(levels)  # (7, N)
    vals = node_values(graph, moved, xp=xp)
    for i in switched:
        node = graph.nodes[i]
        args = [xp.broadcast_to(xp.asarray(vals[a], dtype=dtype), (len(levels), N)) for a in node.args]
        sw = xp.sign(PRIMITIVES[node.op].switch(xp, *args))
        live = xp.isfinite(sw[0])
        hit |= live & (xp.isfinite(sw[1:]) & (sw[1:] != sw[0])).any(axis=0)
    return hit
