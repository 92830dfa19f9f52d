"""Forward mode: dual numbers, value + tangent, pushed through the graph in one pass.

A tangent may be a vector (one component per input direction), so the whole Jacobian comes out of a
single sweep. Both the dual arithmetic and the tangent rule come from the primitive table:
``tangent = sum(partial_i * tangent_i)``.
"""
from __future__ import annotations

import math
import random

import numpy as np

from gradcli.core.graph import Graph, walk
from gradcli.core.primitives import PRIMITIVES, NumericOps, Ops
from gradcli.methods import extended_range


class Dual:
    """A number carrying a tangent: ``Dual(3.0, 1.0)`` is x = 3 seeded with dx = 1.

    Arithmetic and every primitive of the table work on it (``forward.F.sin(d)``), so any function
    written with them can be differentiated by calling it on duals.
    """

    __slots__ = ("value", "tangent")
    __array_priority__ = 1000  # numpy scalars on the left must defer to our reflected operators

    def __init__(self, value, tangent=0.0):
        self.value = value
        self.tangent = tangent

    def __repr__(self):
        return f"Dual({self.value!r}, {self.tangent!r})"

    def __add__(self, o): return F.add(self, o)
    def __radd__(self, o): return F.add(o, self)
    def __sub__(self, o): return F.sub(self, o)
    def __rsub__(self, o): return F.sub(o, self)
    def __mul__(self, o): return F.mul(self, o)
    def __rmul__(self, o): return F.mul(o, self)
    def __truediv__(self, o): return F.div(self, o)
    def __rtruediv__(self, o): return F.div(o, self)
    def __pow__(self, o): return F.pow(self, o)
    def __rpow__(self, o): return F.pow(o, self)
    def __neg__(self): return F.neg(self)
    def __pos__(self): return self


def split(a):
    """(value, tangent) of a dual number; (a, None) for anything else."""
    return (a.value, a.tangent) if isinstance(a, Dual) else (a, None)


def scale_tangent(p, t, xp=np):
    """p * t, except that a zero tangent stays zero when p is infinite: the derivative of acos(z) at
    z = -1 is infinite in z, but that must not turn d/dx of x*acos(z) into inf * 0 = nan. Over arrays of
    ``xp``, point by point, whatever the other points hold (and without asking the device whether any
    is infinite); dual numbers (nested duals) as they are."""
    out = p * t
    if isinstance(p, (float, np.floating)):
        return out if math.isfinite(p) else xp.where(xp.asarray(t) == 0, 0.0, out)
    if isinstance(p, Dual) or isinstance(t, Dual) or not hasattr(p, "dtype"):
        return out
    if isinstance(p, np.ndarray) and np.isfinite(p).all():  # on the host asking is cheaper than the fix
        return out
    return xp.where(xp.isnan(out) & (t == 0), 0.0, out)


class DualOps(Ops):
    """Primitives on dual numbers: the value from ``prim.value``, the tangent from ``prim.partials``.

    The partials are evaluated with ``inner`` ops, so nesting (duals of duals) gives higher orders.
    """

    def __init__(self, xp=np, inner: Ops | None = None, dual=None, partial=None):
        self.xp = xp
        self.inner = inner or NumericOps(xp)
        self.dual = dual or Dual  # the class of the results
        self.partial = partial  # a map applied to every local partial (abs, for magnitudes)

    def apply(self, name, *args):
        prim = PRIMITIVES[name]
        parts = [split(a) for a in args]
        vals = [v for v, _ in parts]
        ans = self.inner.apply(name, *vals)
        tangent = None
        for rule, (_, t) in zip(prim.partials, parts):
            if t is None:
                continue
            p = rule(self.inner, ans, *vals)
            if isinstance(p, float) and p == 0.0:
                continue
            if self.partial is not None:
                p = self.partial(p)
            term = t if (isinstance(p, float) and p == 1.0) else scale_tangent(p, t, self.xp)
            tangent = term if tangent is None else tangent + term
        if tangent is None:
            return ans if all(t is None for _, t in parts) else self.dual(ans, 0.0)
        return self.dual(ans, tangent)


F = DualOps()


def jiggled(jiggle, dtype=np.float64) -> dict:
    """The hooks of :func:`gradcli.core.graph.walk` that add one ulp of rounding in the direction of
    ``jiggle[i]`` (signs, shape (nodes, 2): value, tangent) to every computed value and tangent and to
    every inexact constant (its exact text is not its float); no hooks for ``jiggle`` None."""
    if jiggle is None:
        return {"const": lambda i, c: dtype(c.value)}
    eps = np.finfo(dtype).eps

    def const(i, c):
        v = dtype(c.value)
        return v if c.exact() == c.value else dtype(v * (1 + eps * jiggle[i, 0]))

    def perturb(i, d):
        up, tu = 1 + eps * jiggle[i, 0], 1 + eps * jiggle[i, 1]
        return Dual(d.value * up, d.tangent * tu) if isinstance(d, Dual) else d * up

    return {"const": const, "perturb": perturb}


def sweep(graph: Graph, seeds: dict, ops: DualOps = F, dtype=np.float64, jiggle=None, observe=None) -> list:
    """Push dual numbers through ``graph``: ``seeds`` maps each variable to its Dual; returns the outputs
    (Dual, or a plain number for an output that depends on no variable). Values may be numbers or
    arrays, so the same loop serves one point and a batch. With ``jiggle`` (signs, shape (nodes, 2)),
    every computed value and tangent, and every inexact constant, gets one extra rounding error of one
    ulp in that direction: see :func:`rounding_spread`. ``observe(i, dual)`` sees every node's result
    (:func:`gradcli.core.graph.walk`)."""
    return walk(graph, ops, seeds, observe=observe, **jiggled(jiggle, dtype))


def jacobian(graph: Graph, point: dict, jiggle: np.ndarray | None = None) -> tuple[list, np.ndarray]:
    """Values and the Jacobian (rows = outputs, columns = ``graph.variables``) in one forward sweep.

    Each variable is seeded with a unit tangent vector, so tangents have one entry per variable.
    ``jiggle``: see :func:`sweep`.
    """
    watch = extended_range.Watch()
    values, J = _jacobian(graph, point, jiggle, watch)
    return values, extended_range.at_point(lambda wide, seen: _jacobian(graph, wide, jiggle, seen)[1], point, J,
                                           watch)


def watched_ops(watch, xp=np) -> DualOps:
    """Dual-number ops whose every local partial ``watch`` sees (a partial can leave the range that the
    tangents it multiplies bring back: -1/y**2 = 3.7e-348 times exp(400))."""
    def see(p):
        watch.see(p)
        return p
    return DualOps(xp, partial=see)


def _jacobian(graph: Graph, point: dict, jiggle, watch):
    n = len(graph.variables)
    dtype = np.result_type(np.float64, *[np.asarray(point[v]).dtype for v in graph.variables])
    eye = np.eye(n, dtype=dtype)
    seeds = {v: Dual(dtype.type(point[v]), eye[k]) for k, v in enumerate(graph.variables)}
    with np.errstate(all="ignore"):
        outs = sweep(graph, seeds, watched_ops(watch), dtype=dtype.type, jiggle=jiggle,
                     observe=lambda i, d: watch.see(d))
        values, rows = [], []
        for out in outs:
            v, t = split(out)
            values.append(float(v))
            rows.append(np.zeros(n, dtype=dtype) if t is None else np.broadcast_to(np.asarray(t, dtype=dtype), (n,)))
        return values, np.array(rows, dtype=dtype).reshape(len(graph.outputs), n)


def magnitudes(graph: Graph, point: dict) -> np.ndarray:
    """sum over paths of |product of partials|: the Jacobian computed without any cancellation, the
    size that rounding in the computed derivative is relative to."""
    n = len(graph.variables)
    eye = np.eye(n)
    seeds = {v: Dual(np.float64(point[v]), eye[k]) for k, v in enumerate(graph.variables)}
    with np.errstate(all="ignore"):
        outs = sweep(graph, seeds, DualOps(partial=np.abs))
    rows = [np.broadcast_to(np.asarray(split(o)[1] if isinstance(o, Dual) else 0.0, dtype=float), (n,))
            for o in outs]
    return np.array(rows, dtype=float).reshape(len(graph.outputs), n)


def rounding_spread(graph: Graph, point: dict, trials: int = 3, seed: int = 0) -> np.ndarray:
    """How far float64 rounding alone can move the Jacobian at ``point``: the largest change over a few
    runs in which every rounding is off by one more ulp in a random direction (Monte Carlo arithmetic).

    Cancellation (d/dx of x - sin(x) near 0), ill-conditioned steps (tan of x + 1 near a pole) and
    inexact constants (sin(pi) is 1.2e-16, not 0) all show up here, and nowhere else.
    """
    return monte_carlo_spread(lambda signs: jacobian(graph, point, signs)[1], jacobian(graph, point)[1],
                              len(graph.nodes), trials, seed)


def monte_carlo_spread(run, base, nodes: int, trials: int = 3, seed: int = 0, xp=np):
    """The largest ``|run(signs) - base|`` over ``trials`` random sign patterns (``nodes`` x 2: each
    node's value and tangent rounded one more ulp up or down): Monte Carlo arithmetic for the
    Jacobian, the Hessian and a batch alike. The patterns depend on ``seed`` alone; they come from
    Python's ``random``, as numpy.random's import alone costs a point command a sixth of its start-up."""
    rng = random.Random(seed)
    spread = xp.zeros_like(base)
    with np.errstate(invalid="ignore"):
        for _ in range(trials):
            signs = np.array([rng.choice((-1.0, 1.0)) for _ in range(2 * nodes)]).reshape(nodes, 2)
            spread = xp.fmax(spread, xp.abs(run(signs) - base))
    return spread


def input_spread(run, graph: Graph, point: dict, trials: int = 3, seed: int = 1):
    """How far one ulp in every variable and every inexact constant moves ``run(point, signs)`` (a
    Jacobian or a Hessian, with ``signs`` as for :func:`monte_carlo_spread`): how well the derivative is
    determined at a point that is itself a float, which no way of computing it can beat. Rosenbrock's
    gradient at its minimum moves by 1.3e-13 per ulp of x, and sin(pi)*x's by 1.2e-16 (pi is inexact):
    a rounding spread of that size is the problem's, not a loss of the program's.
    -> (spread, smooth): ``smooth`` where it moves linearly with the coordinates, tested at 2**16 and 2**17
    ulps, far enough that the result's own rounding does not hide the line (at tan(59**59) one ulp already
    moves it by chance, and there the spread measures nothing)."""
    eps = np.finfo(np.float64).eps
    leaves = np.array([[float(n.op in ("var", "const"))] for n in graph.nodes]).reshape(len(graph.nodes), 1)
    base = run(point, None)

    def moved(signs, ulps):
        s = signs * leaves * ulps
        return run({v: np.float64(point[v]) * (1 + eps * s[graph.var_node(v), 0]) for v in graph.variables}, s)

    def both(signs):  # |both - base|: how far one ulp moves it, K ulps, and how far 2K miss twice that
        far = moved(signs, 2.0 ** 16)
        return np.stack([moved(signs, 1.0), far, moved(signs, 2.0 ** 17) - 2 * far + 2 * base])
    spread, far, bend = monte_carlo_spread(both, np.stack([base] * 3), len(graph.nodes), trials, seed)
    return spread, bend <= far / 10


def rounding_culprits(run, graph: Graph, point: dict, limit: int = 400):
    """Per entry of ``run(point, signs)``, the operation whose one extra ulp of rounding moves it most:
    where the program as written loses its digits -> array of node indices of the result's shape (-1
    where no operation moves it), or None beyond ``limit`` nodes (one run per operation)."""
    nodes = len(graph.nodes)
    if nodes > limit:
        return None
    base = run(point, None)
    worst, who = np.zeros_like(base), np.full(base.shape, -1)
    signs = np.zeros((nodes, 2))
    with np.errstate(invalid="ignore"):
        for i, node in enumerate(graph.nodes):
            if node.op == "var" or (node.op == "const" and node.attr.exact() == node.attr.value):
                continue
            signs[i] = 1.0
            moved = np.nan_to_num(np.abs(run(point, signs) - base))
            signs[i] = 0.0
            who = np.where(moved > worst, i, who)
            worst = np.fmax(worst, moved)
    return who
