"""Reverse mode: a tape of local partials, swept backward (PyTorch's semantics, numpy's arithmetic).

Each operation on a :class:`Var` that requires grad records its arguments and the local partials
``rule(NumericOps(np), ans, *args)`` from the primitive table. ``backward`` orders everything reachable
from the output into a Wengert list and accumulates ``adjoint_i += adjoint * partial_i`` from the output
to the leaves. As in PyTorch: leaves accumulate into ``.grad`` across calls, the saved partials are freed
after a backward unless ``retain_graph=True``, and ``grad`` is the functional form that leaves ``.grad``
alone. The tape and :func:`jacobian` (a :class:`~gradcli.core.graph.Graph` swept directly, without Vars)
share the one reverse sweep, :func:`gradcli.core.graph.sweep_back`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from gradcli.core.graph import graph_sweep, sweep_back, walk
from gradcli.core.primitives import PRIMITIVES, NumericOps, Ops
from gradcli.methods import extended_range

_NUMERIC = NumericOps(np)
_FREED = ("Trying to backward through the graph a second time (or directly access saved values after they "
          "have already been freed). Saved partials are freed after backward() or grad(); specify "
          "retain_graph=True if you need to backward through the graph a second time.")


def _as_value(x):
    """numpy float64 (or the complex / float dtype given); 0-d becomes a numpy scalar.

    A value of a type of its own (a dual number, for forward-over-reverse) passes through unchanged:
    the tape's ``ops`` know how to compute with it."""
    a = np.asarray(x)
    if a.dtype == object and a.ndim == 0:
        return x
    if a.dtype.kind not in "fc":
        a = a.astype(np.float64)
    return a[()] if a.ndim == 0 else a


class Var:
    """A value on the tape. ``Var(value, requires_grad=True)`` is a leaf whose ``.grad`` backward fills."""

    __slots__ = ("value", "grad", "_requires_grad", "_leaf", "_parents", "_partials")
    # numpy must hand ``np.float64(2) * var`` to Var.__rmul__ instead of making an object array
    __array_ufunc__ = None

    def __init__(self, value, requires_grad: bool = False):
        self.value = _as_value(value.value if isinstance(value, Var) else value)
        self.grad = None
        self._requires_grad = bool(requires_grad)
        self._leaf = True
        self._parents: tuple = ()
        self._partials: tuple | None = ()

    @classmethod
    def _result(cls, ans, parents, partials):
        v = cls.__new__(cls)
        v.value, v.grad, v._requires_grad, v._leaf = ans, None, True, False
        v._parents, v._partials = tuple(parents), tuple(partials)
        return v

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool):
        if not self._leaf:
            raise RuntimeError("requires_grad can only be changed on leaf Vars; use detach() for a non-leaf")
        self._requires_grad = bool(flag)

    @property
    def is_leaf(self) -> bool:
        """True for Vars made by the user (and for results that do not require grad), as in PyTorch."""
        return self._leaf

    @property
    def shape(self) -> tuple:
        return np.shape(self.value)

    def __repr__(self):
        flag = ", requires_grad=True" if self._requires_grad else ""
        body = repr(np.asarray(self.value).item()) if np.ndim(self.value) == 0 else np.array_repr(self.value)
        return f"Var({body}{flag})"

    def detach(self) -> "Var":
        """A new leaf with the same value, cut from the tape."""
        return Var(self.value)

    def zero_grad(self, set_to_none: bool = True):
        """Reset ``.grad`` to None (default) or to zeros of this Var's shape."""
        self.grad = None if set_to_none else np.zeros_like(self.value)[()]

    def backward(self, seed=None, retain_graph: bool = False):
        """Accumulate d(self)/d(leaf), times ``seed``, into ``.grad`` of every leaf that requires grad.

        ``seed`` (the output's cotangent) may be omitted only for a scalar output.
        """
        _sweep([self], [seed], retain_graph, wanted=None)

    # Operators go through the primitive table like every other function.
    def __add__(self, other): return F.add(self, other)
    def __radd__(self, other): return F.add(other, self)
    def __sub__(self, other): return F.sub(self, other)
    def __rsub__(self, other): return F.sub(other, self)
    def __mul__(self, other): return F.mul(self, other)
    def __rmul__(self, other): return F.mul(other, self)
    def __truediv__(self, other): return F.div(self, other)
    def __rtruediv__(self, other): return F.div(other, self)
    def __pow__(self, other): return F.pow(self, other)
    def __rpow__(self, other): return F.pow(other, self)
    def __neg__(self): return F.neg(self)
    def __pos__(self): return self


class TapeOps(Ops):
    """The primitives over Vars: ``F.sin(x)`` evaluates and, if needed, records the local partials.

    ``ops`` computes the values and the partials (numpy by default). With dual-number ops
    (``TapeOps(DualOps())``) the recorded partials carry tangents, and a backward sweep differentiates
    the gradient itself: forward-over-reverse second derivatives from the same partial rules.
    """

    def __init__(self, ops: Ops | None = None):
        self.ops = ops or _NUMERIC

    def apply(self, name, *args):
        prim = PRIMITIVES[name]
        if len(args) != prim.arity:
            raise TypeError(f"{name} takes {prim.arity} argument(s), got {len(args)}")
        values = [a.value if isinstance(a, Var) else _as_value(a) for a in args]
        ans = self.ops.apply(name, *values)
        if not any(isinstance(a, Var) and a._requires_grad for a in args):
            return Var(ans)  # a constant: nothing to differentiate, nothing on the tape
        parents, partials = [], []
        for arg, rule in zip(args, prim.partials):
            if isinstance(arg, Var) and arg._requires_grad:
                p = rule(self.ops, ans, *values)
                if type(p) is float and p == 0.0:  # the table's "no dependence" marker
                    continue
                parents.append(arg)
                partials.append(p)
        return Var._result(ans, parents, partials)


F = TapeOps()


def __getattr__(name):
    # reverse.sin(x), reverse.atan2(y, x): every primitive as a module-level function
    if name in PRIMITIVES:
        return getattr(F, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the backward sweep ------------------------------------------------------------------------------

def _wengert(roots) -> list:
    """Everything reachable from ``roots``, arguments before users; iterative so deep chains work."""
    order, seen = [], set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root._parents))]
        while stack:
            node, todo = stack[-1]
            for parent in todo:
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append((parent, iter(parent._parents)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _unbroadcast(g, shape):
    """Sum ``g`` down to ``shape``: an argument broadcast in the forward pass collects every copy's adjoint."""
    if np.shape(g) == shape:
        return g
    g = np.asarray(g)
    if g.ndim > len(shape):
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, (n, m) in enumerate(zip(g.shape, shape)) if m == 1 and n != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    # a partial that is a plain number can leave g smaller than the argument
    return g if g.shape == shape else np.broadcast_to(g, shape)


def _unbroadcast_times(g, partial, arg):
    return _unbroadcast(g * partial, arg.shape)


def _owned(g, shape):
    """A fresh array (numpy scalar for 0-d) of ``shape``: never a view of a seed or a partial."""
    return np.array(np.broadcast_to(g, shape))[()]


def _seed(out: Var, seed):
    if seed is None:
        if np.size(out.value) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs; pass seed=...")
        return np.ones_like(out.value)[()]
    try:
        return np.broadcast_to(_as_value(seed), out.shape)
    except ValueError:
        raise RuntimeError(f"seed of shape {np.shape(seed)} does not match the output's shape {out.shape}") from None


def _sweep(outputs, seeds, retain_graph, wanted):
    """Accumulate adjoints from ``outputs`` down. ``wanted`` None: into leaves' ``.grad`` (backward);
    otherwise a list of Vars whose adjoints are returned (grad), with ``.grad`` untouched."""
    for out in outputs:
        if not out._requires_grad:
            raise RuntimeError("differentiating a Var that does not require grad: none of its inputs was "
                               "created with requires_grad=True, so it is a constant")
    seeded: dict = {}
    for out, seed in zip(outputs, seeds):
        g = _seed(out, seed)
        seeded[out] = seeded[out] + g if out in seeded else g
    order = _wengert(outputs)
    if any(node._partials is None for node in order):
        raise RuntimeError(_FREED)  # checked up front, so a failed backward changes no .grad
    found = {id(v): None for v in wanted} if wanted is not None else None

    def reached(node, g, edges):
        if found is not None:
            if id(node) in found:
                found[id(node)] = g
        elif node._leaf:
            g = _owned(g, node.shape)
            node.grad = g if node.grad is None else node.grad + g

    # keyed by the Vars themselves (hashed by identity), users before their arguments
    sweep_back(reversed(order), lambda node: node._parents, lambda node, k: node._partials[k],
               seeded, _unbroadcast_times, observe=reached, edges=False)
    if not retain_graph:
        for node in order:
            if not node._leaf:
                node._partials = None
    if wanted is None:
        return None
    return tuple(np.zeros_like(v.value)[()] if found[id(v)] is None else _owned(found[id(v)], v.shape)
                 for v in wanted)


def grad(outputs, inputs: Sequence[Var], seeds=None, retain_graph: bool = False) -> tuple:
    """d(outputs)/d(inputs) as a tuple, one array per input, without touching any ``.grad``.

    ``outputs`` is a Var or a sequence of Vars (their seeded gradients add up); ``seeds`` matches it
    (a single seed for a single output) and may be omitted for scalar outputs. An input the outputs do
    not depend on gets zeros of its shape. The saved partials are freed unless ``retain_graph=True``.
    """
    single = isinstance(outputs, Var)
    outputs = [outputs] if single else list(outputs)
    if seeds is None:
        seeds = [None] * len(outputs)
    elif single:
        seeds = [seeds]
    else:
        seeds = list(seeds)
        if len(seeds) != len(outputs):
            raise ValueError(f"{len(seeds)} seeds for {len(outputs)} outputs")
    inputs = list(inputs)
    for v in inputs:
        if not isinstance(v, Var) or not v._requires_grad:
            raise RuntimeError("every input of grad() must be a Var that requires grad")
    return _sweep(outputs, seeds, retain_graph, wanted=inputs)


def local_partials(graph, vals: list, ops: Ops = _NUMERIC):
    """partial(i, k) for :func:`gradcli.core.graph.graph_sweep`: node i's partial by its k-th argument from
    the table's rule on ``vals`` (every node's value), None where that argument is constant or the rule
    says "no dependence" (the literal 0.0); each node's partials are computed once, when first needed."""
    active, nodes = graph.active, graph.nodes
    memo: dict = {}

    def partial(i, k):
        row = memo.get(i)
        if row is None:
            n = nodes[i]
            args = [vals[a] for a in n.args]
            row = memo[i] = [None if not active[a] else _none_if_zero(rule(ops, vals[i], *args))
                             for rule, a in zip(PRIMITIVES[n.op].partials, n.args)]
        return row[k]

    return partial


def _none_if_zero(p):
    return None if type(p) is float and p == 0.0 else p


def jacobian(graph, point: dict, observe=None) -> tuple[list, np.ndarray]:
    """Values of the graph's outputs at ``point`` and their Jacobian (rows: outputs, columns: variables).

    One pass over the nodes gives every value; then one reverse sweep over the graph per output row
    (:func:`gradcli.core.graph.graph_sweep`), ``observe(row, node, adjoint, edges)`` seeing each of its
    steps. Division by zero and domain errors give inf/nan, never exceptions. Entries float64's range
    lost on the way are recomputed in a wider type (:mod:`gradcli.methods.extended_range`), except when
    observed: the sweeps shown are float64's own.
    """
    watch = extended_range.Watch()
    values, J = _jacobian(graph, point, watch, observe)
    if observe is None:
        J = extended_range.at_point(lambda wide, seen: _jacobian(graph, wide, seen)[1], point, J, watch)
    return values, J


def _jacobian(graph, point: dict, watch, observe=None):
    def seen(r, i, g, edges):
        watch.see(g, *(p for _, p, _ in edges or ()))
        if observe is not None:
            observe(r, i, g, edges)

    with np.errstate(all="ignore"):
        # float64 even for an int or float32 point: the reference methods all work in float64
        x = {name: _as_value(np.asarray(point[name], dtype=np.result_type(np.float64, point[name])))
             for name in graph.variables}
        dtype = np.result_type(np.float64, *x.values())
        # constants in the point's type: a subexpression of constants (exp(-740)) is widened with it
        vals = walk(graph, _NUMERIC, x, const=lambda i, c: dtype.type(c.value), keep=True)
        watch.see(*vals)
        jac = np.zeros((len(graph.outputs), len(graph.variables)), dtype=dtype)
        partial = local_partials(graph, vals)
        active = graph.active
        for r, o in enumerate(graph.outputs):
            if not active[o]:
                continue
            adjoints = graph_sweep(graph, r, partial, np.ones_like(vals[o])[()],
                                   observe=lambda i, g, edges, r=r: seen(r, i, g, edges))
            jac[r] = [np.asarray(adjoints.get(name, 0.0)).item() for name in graph.variables]
        values = [np.asarray(vals[o]).item() for o in graph.outputs]
    return values, jac
