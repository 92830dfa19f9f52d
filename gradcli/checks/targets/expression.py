"""String checks: ``gradcli.check("x*sin(y)", grad={"x": "sin(y)", ...}, x=1.0, y=2.0)`` as functions.

The expression is evaluated with ``gradcli.core.graph.evaluate`` (never ``eval``), elementwise over array
inputs, which broadcast together. The ``grad=`` expressions are the elementwise partial derivatives;
the vjp under test is ``g * d`` summed down to each input's shape. The AD reference is gradcli's own
reverse mode (``gradcli.methods.reverse``) on the expression's graph: it reads the primitive table's
partials, never the user's ``grad=`` text.
"""
from __future__ import annotations

import numpy as np

from gradcli.core.graph import evaluate, node_values
from gradcli.methods.reverse import F, Var
from gradcli.methods.reverse import grad as reverse_grad
from gradcli.core.parser import parse


def _stack(outs):
    outs = np.broadcast_arrays(*[np.asarray(o) for o in outs])
    return outs[0] if len(outs) == 1 else np.stack(outs)


def _unbroadcast(g, shape):
    g = np.asarray(g)
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return np.broadcast_to(g, shape).copy()


def expression_functions(spec):
    """-> (fn(**inputs), vjp(g, **inputs) or None, ad_factory(base, wrt))."""
    graph = parse(spec.expression)

    def fn(**kw):
        with np.errstate(all="ignore"):
            return _stack(evaluate(graph, kw))

    return fn, _expression_vjp(spec.grad), lambda base, wrt: GraphAD(graph, base, wrt)


def _expression_vjp(grad: dict | None):
    """The hand-written gradient of a string check, {name: expression}, as a vjp (None without one)."""
    if grad is None:
        return None
    partials = {name: parse(text) for name, text in grad.items()}

    def user_vjp(g, **kw):
        out = {}
        for name, pg in partials.items():
            with np.errstate(all="ignore"):
                d = evaluate(pg, {v: kw[v] for v in pg.variables})[0]
            out[name] = _unbroadcast(np.asarray(g) * d, np.shape(kw[name]))
        for name in kw:
            if name not in out:
                raise KeyError(f"grad= has no expression for {name!r}")
        return out

    return user_vjp


class GraphAD:
    """The trace API (value, ok, problems, vjp, gradient) for an expression graph, by reverse mode."""

    def __init__(self, graph, base, wrt):
        self.graph, self.base, self.wrt = graph, base, list(wrt)
        self.ok, self.problems = True, []
        leaves, outs = self._tape()
        self.value = _stack([o.value if hasattr(o, "value") else o for o in outs])

    def _tape(self):
        leaves = {k: Var(np.asarray(v, dtype=np.float64), requires_grad=k in self.wrt) for k, v in self.base.items()}
        with np.errstate(all="ignore"):
            vals = node_values(self.graph, leaves, ops=F)
        return leaves, [vals[o] for o in self.graph.outputs]

    def vjp(self, cotangent) -> dict:
        leaves, outs = self._tape()
        shape = np.shape(self.value)
        g = np.asarray(cotangent, dtype=np.float64).reshape(shape)
        seeds = [g] if len(outs) == 1 else list(g)
        live = [(o, s) for o, s in zip(outs, seeds) if getattr(o, "requires_grad", False)]
        inputs = [leaves[k] for k in self.wrt]
        if not live:
            return {k: np.zeros(np.shape(self.base[k])) for k in self.wrt}
        with np.errstate(all="ignore"):
            gs = reverse_grad([o for o, _ in live], inputs, seeds=[_unbroadcast(s, np.shape(o.value)) for o, s in live])
        return {k: _unbroadcast(v, np.shape(self.base[k])) for k, v in zip(self.wrt, gs)}

    def gradient(self) -> dict:
        return self.vjp(np.ones(np.shape(self.value)))
