"""Second derivatives of a scalar expression: the Hessian by four routes that share as little as possible.

* :func:`forward_over_reverse`: the reverse-mode tape run on dual numbers. Each variable's tangent is
  a unit vector, the tape records partials evaluated with :class:`~gradcli.methods.forward.DualOps`,
  and one backward sweep gives adjoints whose values are the gradient and whose tangents are the
  Hessian's rows. Seeding the tangents with a direction ``v`` instead gives H·v in one sweep.
* :func:`reverse_over_forward`: forward mode whose values are tape Vars: one forward pass per
  direction e_k, then a reverse sweep of the tangent (d f/d x_k as a function of x) gives row k.
* :func:`central_of_reverse`: central differences of the reverse-mode gradient, with the step choice
  and error estimate of :func:`gradcli.methods.numeric.central` (every step in one vectorised tape).
* :func:`symbolic_hessian`: sympy's second derivatives of the sympy expression, to 35 digits.

The first two differentiate the table's partial rules once more (the same single-written rules, on
other value types); the difference quotient only reads first derivatives; sympy reads none of ours.
:func:`rounding_spread` is the Monte Carlo arithmetic estimate of how far rounding alone moves the
Hessian (nested forward mode, every rounding one ulp off in a random direction).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import sympy

from gradcli.core.graph import Graph, walk
from gradcli.engines.program import gradient_graph
from gradcli.methods import differences, extended_range, forward, numeric, reverse, symbolic
from gradcli.core.primitives import NumericOps
from gradcli.methods.extended_range import Watch, Watched
from gradcli.methods.forward import Dual, DualOps, jiggled, split
from gradcli.methods.reverse import TapeOps, Var


def _seen_duals(watch: Watch, inner=None) -> tuple[type, DualOps]:
    """A dual-number class and the ops that make it, every call of which ``watch`` sees, the
    arithmetic of the class's own operators included: a backward sweep multiplies adjoints by the
    tape's dual partials with those operators, so the adjoints are seen too."""
    cls = type("SeenDual", (Dual,), {"__slots__": ()})
    ops = Watched(DualOps(inner=Watched(inner or NumericOps(), watch), dual=cls, partial=_seeing(watch)), watch,
                  values_seen=True)
    for op, prim in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("pow", "pow")):
        setattr(cls, f"__{op}__", lambda a, b, _p=prim: ops.apply(_p, a, b))
        setattr(cls, f"__r{op}__", lambda a, b, _p=prim: ops.apply(_p, b, a))
    cls.__neg__ = lambda a: ops.apply("neg", a)
    return cls, ops


def _seeing(watch: Watch):
    """The ``partial`` hook of DualOps that shows ``watch`` each local partial (a rule's own arithmetic,
    -a/y on plain numbers, goes through no ops)."""
    def see(p):
        watch.see(p)
        return p
    return see


def _see_tape(watch: Watch, root) -> None:
    """Every value and recorded partial of the tape that ends in ``root``: the partials a rule over tape
    variables records (the second derivatives of reverse-over-forward) go through no watched ops."""
    for node in reverse._wengert([root]):
        watch.see(node.value, *node._partials)


def _dtype(point: dict, names) -> np.dtype:
    """float64, or the wider type of a point widened by :mod:`gradcli.methods.extended_range`."""
    return np.result_type(np.float64, *[np.asarray(point[v]).dtype for v in names])


def _consts(dtype, const=None) -> dict:
    """The ``const`` hook of :func:`walk` giving constants (their float64 value, or ``const``'s) in
    ``dtype``: a subexpression of constants alone, exp(-740), is then computed as wide as the rest."""
    const = const or (lambda i, c: np.float64(c.value))
    return {"const": lambda i, c: dtype.type(const(i, c))}


def _redone_wider(route, graph: Graph, point: dict, *args) -> HessianResult:
    """``route(graph, point, watch, *args)``, its gradient and Hessian recomputed in the extended type
    where float64 lost range on the way (:func:`gradcli.methods.extended_range.at_point`): the second
    partials of log(1+z**2) at z = 1e80 pass through -1/y**2 = 1e-320, subnormal, on the way to an
    ordinary -2e-160."""
    watch = Watch()
    res = route(graph, point, watch, *args)
    both = lambda r: np.concatenate([np.ravel(r.gradient), np.ravel(r.hessian)])
    flat = extended_range.at_point(lambda wide, seen: both(route(graph, wide, seen, *args)), point,
                                   both(res), watch).astype(np.float64)
    n = np.size(res.gradient)
    res.gradient = flat[:n].reshape(np.shape(res.gradient))
    res.hessian = flat[n:].reshape(np.shape(res.hessian))
    return res


@dataclass
class HessianResult:
    """One route's value, gradient and Hessian (or H·V for given tangents), or why there is none."""

    value: float
    gradient: np.ndarray
    hessian: np.ndarray | None
    error: np.ndarray | None = None  # a numerical method's own error estimate
    status: str = "ok"
    message: str = ""
    detail: dict = field(default_factory=dict)


def _require_scalar(graph: Graph):
    if len(graph.outputs) != 1:
        raise ValueError(f"a Hessian needs a scalar expression; this one has {len(graph.outputs)} outputs")


def forward_over_reverse(graph: Graph, point: dict, tangents=None) -> HessianResult:
    """The Hessian (or H @ tangents, with ``tangents`` of shape (nvars,) or (nvars, k)) by one reverse
    sweep of a tape whose values are dual numbers."""
    _require_scalar(graph)
    return _redone_wider(_forward_over_reverse, graph, point, tangents)


def _forward_over_reverse(graph: Graph, point: dict, watch: Watch, tangents) -> HessianResult:
    n = len(graph.variables)
    dtype = _dtype(point, graph.variables)
    V = np.eye(n) if tangents is None else np.asarray(tangents, dtype=np.float64).reshape(n, -1)
    column = {v: k for k, v in enumerate(graph.variables)}
    SeenDual, ops = _seen_duals(watch)
    with np.errstate(all="ignore"):
        leaves = {name: Var(SeenDual(dtype.type(point[name]), V[column[name]].astype(dtype)), requires_grad=True)
                  for name in graph.variables}
        out = walk(graph, TapeOps(ops), leaves, **_consts(dtype))[0]
        inputs = [leaves[name] for name in graph.variables]
        value = out.value if isinstance(out, Var) else out
        if isinstance(out, Var) and out.requires_grad:
            adjoints = reverse.grad(out, inputs, seeds=1.0)
        else:  # a constant
            adjoints = [0.0] * n
    value = float(split(value)[0])
    grad = np.zeros(n, dtype=dtype)
    H = np.zeros((n, V.shape[1]), dtype=dtype)
    for j, a in enumerate(adjoints):
        g, t = split(a)
        grad[j] = split(g)[0] if isinstance(g, Dual) else np.asarray(g)
        if t is not None:
            H[j] = np.broadcast_to(np.asarray(t, dtype=dtype), (V.shape[1],))
    return HessianResult(value, grad, H if tangents is None else H.reshape(np.shape(tangents)))


def hvp(graph: Graph, point: dict, v) -> np.ndarray:
    """The Hessian-vector product H·v in one forward-over-reverse sweep (no Hessian is formed)."""
    return forward_over_reverse(graph, point, tangents=np.asarray(v, dtype=np.float64)).hessian


#: How many numbers one vectorised pass may carry per value (rows of the Hessian x what each row
#: holds): the rows go through in blocks this size, so any number of variables fits in bounded memory,
#: while a few hundred variables still take one pass instead of one per row.
BLOCK_ENTRIES = 1 << 18


def _row_blocks(n: int, per_row: int):
    rows = max(1, BLOCK_ENTRIES // max(per_row, 1))
    return [(k0, min(n, k0 + rows)) for k0 in range(0, n, rows)]


def reverse_over_forward(graph: Graph, point: dict) -> HessianResult:
    """The Hessian by forward mode over tape Vars: row k is the tangent along e_k (df/dx_k, recorded
    on the tape) swept backward. The rows of a block run side by side, as copies of the point (copy k
    carries the tangent e_k), in one forward pass and one reverse sweep."""
    _require_scalar(graph)
    return _redone_wider(_reverse_over_forward, graph, point)


def _reverse_over_forward(graph: Graph, point: dict, watch: Watch) -> HessianResult:
    n = len(graph.variables)
    dtype = _dtype(point, graph.variables)
    H = np.zeros((n, n), dtype=dtype)
    grad = np.zeros(n, dtype=dtype)
    value = np.nan
    # the backward sweeps multiply plain arrays, which no watch sees: their products' range shows in
    # the Hessian's entries (0, subnormal or not finite), which at_point recomputes wider
    ops = Watched(DualOps(inner=TapeOps(Watched(NumericOps(), watch)), partial=_seeing(watch)), watch,
                  values_seen=True)
    with np.errstate(all="ignore"):
        if n == 0:
            out = walk(graph, ops, {}, **_consts(dtype))[0]
            value = float(np.asarray(out.value if isinstance(out, Var) else out))
        for k0, k1 in _row_blocks(n, len(graph.nodes)):
            value = _rows_by_copies(graph, point, ops, k0, k1, grad, H)
        # a copy whose tangent is 0 still meets every partial, and an infinite one (acos at -1) makes
        # inf * 0 = nan where the row alone has no tangent there: such rows are run on their own
        for k in range(n) if n > 1 else ():
            if not (np.isfinite(grad[k]) and np.isfinite(H[k]).all()):
                _rows_by_copies(graph, point, ops, k, k + 1, grad, H)
    return HessianResult(value, grad, H)


def _rows_by_copies(graph: Graph, point: dict, ops, k0: int, k1: int, grad, H) -> float:
    """Rows k0..k1-1 of the Hessian (and of the gradient) into ``H`` and ``grad``, by
    :func:`reverse_over_forward`'s copies; returns the value."""
    m = k1 - k0
    dtype = H.dtype
    column = {v: k for k, v in enumerate(graph.variables)}
    leaves = {name: Var(np.full(m, dtype.type(point[name])), requires_grad=True) for name in graph.variables}
    inputs = [leaves[name] for name in graph.variables]

    def leaf(name):
        # only the block's variables carry a tangent, each in its own copy (the others are plain Vars)
        k = column[name]
        return Dual(leaves[name], (np.arange(k0, k1) == k).astype(dtype)) if k0 <= k < k1 else leaves[name]

    out = walk(graph, ops, leaf, **_consts(dtype))[0]
    v, t = split(out)
    value = float(np.asarray(v.value if isinstance(v, Var) else v).reshape(-1)[0])
    if t is None:
        grad[k0:k1], H[k0:k1] = 0.0, 0.0
        return value
    grad[k0:k1] = np.broadcast_to(np.asarray(t.value if isinstance(t, Var) else t, dtype=dtype), (m,))
    if isinstance(t, Var) and t.requires_grad:
        _see_tape(ops.watch, t)
        adjoints = reverse.grad(t, inputs, seeds=np.ones(np.shape(t.value), dtype=dtype))
        H[k0:k1] = np.stack([np.broadcast_to(np.asarray(g, dtype=dtype), (m,)) for g in adjoints], axis=1)
    else:
        H[k0:k1] = 0.0
    return value


def _gradient_stencil(graph: Graph):
    """stencil(x, deltas) -> gradient at x + deltas[i, j] e_j for every row i and variable j, as
    (nvars [component], m, nvars [perturbed]): all m*nvars points in one vectorised tape."""
    n = len(graph.variables)

    def stencil(x, deltas):
        m = deltas.shape[0]
        leaves = []
        for k in range(n):
            col = np.full((n, m), x[k])
            col[k] = x[k] + deltas[:, k]
            leaves.append(Var(col.ravel(), requires_grad=True))
        with np.errstate(all="ignore"):
            out = walk(graph, reverse.F, dict(zip(graph.variables, leaves)))[0]
            if not (isinstance(out, Var) and out.requires_grad):
                return np.zeros((n, m, n))
            gs = reverse.grad(out, leaves, seeds=np.ones(np.shape(out.value)))
        G = np.stack([np.broadcast_to(g, (n * m,)) for g in gs])  # (component, perturbed * m)
        return G.reshape(n, n, m).transpose(0, 2, 1)

    return stencil


def central_of_reverse(graph: Graph, point: dict) -> HessianResult:
    """Central differences of the reverse-mode gradient, the step chosen per entry as
    :func:`gradcli.methods.numeric.central` does, with its error estimate."""
    _require_scalar(graph)
    x = np.array([point[v] for v in graph.variables], dtype=np.float64)
    values, J = reverse.jacobian(graph, point)
    if x.size == 0:
        return HessianResult(float(values[0]), np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0)))
    # the gradient's rounding is relative to its terms (d/dy of (y/x)/y cancels to ~1e-16, not 0) and
    # to the intermediates its program rounds (the cosine of x + 1e6 is computed from an argument
    # rounded to 1e-10): the larger of the two scales
    grad_program = gradient_graph(graph)
    with np.errstate(all="ignore"):
        rounding = differences.rounding_scale(grad_program, point)[1:, 0]
    scale = np.fmax(forward.magnitudes(graph, point)[0], rounding)
    r = numeric.central_of(_gradient_stencil(graph), x, noise_scale=scale)
    return HessianResult(float(values[0]), np.asarray(J[0], dtype=float), r.jacobian, r.error, r.status,
                         r.message, r.detail)


@dataclass
class SymbolicHessian:
    status: str  # ok | undefined | unavailable
    message: str = ""
    text: list = field(default_factory=list)  # [i][j] strings of the second derivatives
    gradient_text: list = field(default_factory=list)
    values: list = field(default_factory=list)  # [i][j] 35-digit sympy Floats, None where undefined
    gradient: list = field(default_factory=list)  # 35-digit first derivatives, None where undefined
    value: object = None


def symbolic_hessian(graph: Graph, point: dict, timeout: float | None = symbolic.DEFAULT_TIMEOUT,
                     digits: int = symbolic.DIGITS) -> SymbolicHessian:
    """sympy's Hessian (its own rules, real symbols) evaluated at the exact binary point to 35 digits,
    everything within ``timeout`` seconds (None or 0: no limit)."""
    _require_scalar(graph)
    started = time.monotonic()
    syms = symbolic.symbols_of(graph)
    xs = [syms[v] for v in graph.variables]
    try:
        with symbolic.time_limit(timeout):
            (f,) = symbolic.to_sympy(graph, syms)
            ds = [symbolic.tidy(sympy.diff(f, s)) for s in xs]
            H = symbolic.second_derivatives(ds, xs)
            res = SymbolicHessian("ok", text=[[sympy.sstr(d) for d in row] for row in H],
                                  gradient_text=[sympy.sstr(d) for d in ds])
    except Exception as exc:  # the time limit, and sympy's own internal failures
        return SymbolicHessian("unavailable", symbolic.failure(exc, timeout))
    evaluated, failed = symbolic.evaluate_at(graph, point, [H, ds, [f]], timeout, digits, "the Hessian",
                                             limit=symbolic.remaining(timeout, started))
    if failed:
        return SymbolicHessian("unavailable", failed, text=res.text, gradient_text=res.gradient_text)
    res.values, res.gradient, (res.value,) = evaluated
    if any(v is None for row in res.values for v in row):
        res.status = "undefined"
        res.message = "the symbolic Hessian is not a finite real number at this point"
    return res


class _Mag(Dual):
    """A dual number whose tangent is a magnitude: sums of |partial|·tangent, so nothing cancels."""

    __slots__ = ()


def _magnitude(p):
    return _Mag(_magnitude(p.value), _magnitude(p.tangent)) if isinstance(p, Dual) else np.abs(p)


# DualOps with every local partial replaced by its absolute value (and the absolute value of its own
# tangent, one level in): nested, it gives sum over paths of |products of partials and second partials|,
# the Hessian without cancellation (``scale`` in the tolerance, as for ``grad``)
_MAG_INNER = DualOps(inner=NumericOps(), dual=_Mag, partial=_magnitude)
_MAG_OUTER = DualOps(inner=_MAG_INNER, dual=_Mag, partial=_magnitude)
for _op, _prim in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("pow", "pow")):
    setattr(_Mag, f"__{_op}__", lambda a, b, _p=_prim: _MAG_INNER.apply(_p, a, b))
    setattr(_Mag, f"__r{_op}__", lambda a, b, _p=_prim: _MAG_INNER.apply(_p, b, a))
_Mag.__neg__ = lambda a: _MAG_INNER.apply("neg", a)


def magnitudes(graph: Graph, point: dict) -> np.ndarray:
    """The Hessian computed without any cancellation: what float64 rounding is relative to."""
    return forward_over_forward(graph, point, magnitude=True)


def forward_over_forward(graph: Graph, point: dict, jiggle: np.ndarray | None = None,
                         magnitude: bool = False) -> np.ndarray:
    """The Hessian by nested dual numbers, a block of rows per pass (the outer tangent of x_j is the
    column e_j over the block's rows, the inner one the row e_j over the variables, so that their
    product has one entry per row and variable); with ``jiggle`` (signs, shape (nodes, 2)) every
    computed value and tangent gets one extra rounding error of one ulp (see :func:`rounding_spread`);
    with ``magnitude``, the cancellation-free magnitudes instead (:func:`magnitudes`). Recomputed in
    the extended type where float64 lost range on the way, as the other routes are."""
    _require_scalar(graph)
    if magnitude:  # a scale for the tolerance, which max(|reference|, scale) keeps from underflowing
        return _nested(graph, point, jiggle, _Mag, _MAG_OUTER).astype(np.float64)
    watch = Watch()

    def hessian(p, seen):
        SeenDual, inner = _seen_duals(seen)
        # the outer level's values, partials and tangent products are all made by the inner ops
        return _nested(graph, p, jiggle, Dual, DualOps(inner=inner), SeenDual)

    H = hessian(point, watch)
    # the rounding estimates run this many times over (with ``jiggle``, and at points one ulp away):
    # for them a zero entry alone, mostly a structural zero, is no reason for the wider sweep
    return extended_range.at_point(hessian, point, H, watch, entries=jiggle is None).astype(np.float64)


def _nested(graph, point, jiggle, D, ops, inner_dual=None) -> np.ndarray:
    n = len(graph.variables)
    H = np.zeros((n, n), dtype=_dtype(point, graph.variables))
    with np.errstate(all="ignore"):
        for k0, k1 in _row_blocks(n, n):
            _nested_rows(graph, point, k0, k1, jiggle, D, ops, inner_dual or D, H)
        # as in reverse_over_forward: a row that meets an infinite partial is run on its own, where the
        # tangents of the other rows (zeros) are not there to make inf * 0 = nan
        for k in range(n):
            if not np.isfinite(H[k]).all():
                _nested_rows(graph, point, k, None, jiggle, D, ops, inner_dual or D, H)
    return H


def _nested_rows(graph, point, k0, k1, jiggle, D, ops, Inner, H) -> None:
    """Rows k0..k1-1 of :func:`forward_over_forward` into ``H`` (k1 None: row k0 alone, with a scalar
    outer tangent); ``D`` and ``Inner`` are the outer and inner dual classes ``ops`` works on."""
    n = len(graph.variables)
    eye = np.eye(n, dtype=H.dtype)
    column = {v: k for k, v in enumerate(graph.variables)}
    rows = slice(k0, k0 + 1 if k1 is None else k1)

    def leaf(name):
        j = column[name]
        outer = eye[k0, j] if k1 is None else eye[rows, j:j + 1]
        return D(Inner(H.dtype.type(point[name]), eye[j]), Inner(outer, 0.0))

    hooks = jiggled(jiggle)  # float64's rounding errors, in whatever type H holds
    hooks.update(_consts(H.dtype, hooks["const"]))
    _, t = split(walk(graph, ops, leaf, **hooks)[0])
    H[rows] = 0.0
    if t is not None:
        _, block = split(t)
        if block is not None:
            H[rows] = np.broadcast_to(np.asarray(block, dtype=H.dtype), H[rows].shape)


def rounding_spread(graph: Graph, point: dict, trials: int = 3, seed: int = 0) -> np.ndarray:
    """How far float64 rounding alone can move the Hessian at ``point`` (Monte Carlo arithmetic, as
    :func:`gradcli.methods.forward.rounding_spread` does for the Jacobian)."""
    return forward.monte_carlo_spread(lambda signs: forward_over_forward(graph, point, signs),
                                      forward_over_forward(graph, point), len(graph.nodes), trials, seed)
