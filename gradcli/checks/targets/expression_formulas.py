"""A string check's ``grad=`` formulas against sympy's derivative of its expression, beyond the one point.

At the inputs a wrong formula can agree with the derivative by chance (``cos(y)`` for ``x*cos(y)`` at
x = 1), so a string check that passed there is decided by the formulas themselves: both sides go
through gradcli's parser into sympy (``methods.symbolic.to_sympy``, never ``sympify`` of the text), and

* a difference that is 0 as sympy builds it proves the formula, everywhere both sides are defined;
* otherwise both are evaluated to 35 digits at random points near the inputs (or drawn from ``domain``),
  kept only where the expression is finite and every switch of its kinks (abs, max, relu, the poles)
  has the sign it has at the inputs: the same smooth piece, where one formula must hold. A point where
  the formula is off by more than the check's tolerance fails the check, naming the point;
* where every point agrees, a small difference (``SIMPLIFY_MAX_OPS``) that ``sympy.simplify`` takes
  to 0 is a proof; a larger one is left to the points (simplify can take minutes on a hundred
  operations, and a check's model process must not wait on it).
"""
from __future__ import annotations

import numpy as np

from gradcli.checks.context import Outcome, Verdict
from gradcli.checks.registry import map_domain
from gradcli.core.graph import evaluate, node_values
from gradcli.core.parser import parse
from gradcli.core.primitives import PRIMITIVES
from gradcli.methods import symbolic

POINTS = 8  # random points compared where the difference is not 0 as built
TRIES = 64  # candidates drawn for them (some fall outside the smooth piece or the domain)
SIMPLIFY_MAX_OPS = 30  # simplify took 0.5 s on 1 - tanh(x)**2 - 1/cosh(x)**2, over 100 s on 108 operations
PROVED = "grad= is sympy's derivative of the expression identically: their difference simplifies to 0"
SPREAD = 0.5  # a candidate moves each input by up to this fraction of its size (or by this, at 0)


def judge_formulas(ctx, domain=None) -> Outcome:
    """The grad= formulas of string check ``ctx`` that passed at its inputs, judged symbolically and at
    random points -> an Outcome (a note, or a fail naming a point)."""
    spec = ctx.spec
    graph = parse(spec.expression)
    names = [n for n in ctx.wrt if n in spec.grad]
    sympy = symbolic.load_sympy()
    try:
        syms = symbolic.symbols_of(graph)
        f = symbolic.to_sympy(graph, syms)[0]
        pairs = {n: (symbolic.tidy(sympy.diff(f, syms[n])), symbolic.to_sympy(parse(spec.grad[n]), syms)[0])
                 for n in names}
        open_ = {n: pairs[n] for n in names if pairs[n][0] - pairs[n][1] != 0}
    except Exception as exc:  # noqa: BLE001 - sympy's own failures: the point's verdict stands
        return Outcome(notes=(f"grad= was compared at the inputs only: {symbolic.failure(exc, None)}",))
    if not open_:
        return Outcome(notes=(PROVED,))
    found = _at_points(ctx, graph, open_, domain)
    if found.verdict is not None:
        return found
    try:
        if all(_simplifies_to_zero(sympy, r - u) for r, u in open_.values()):
            return Outcome(notes=(PROVED,))
    except Exception:  # noqa: BLE001 - sympy's own failures: what the points found stands
        pass
    return found


def _simplifies_to_zero(sympy, d) -> bool:
    return sympy.count_ops(d) <= SIMPLIFY_MAX_OPS and sympy.simplify(d) == 0


def _signature(graph, values: list, n: int) -> np.ndarray:
    """The sign of every switch of the graph's kinks, jumps and poles (rows) at each of ``n`` points
    (columns); NaN where a switch does not apply (a power's pole when the exponent is not negative)."""
    rows = [np.zeros(n)]  # a row of its own, so that a graph without switches has a signature too
    for node in graph.nodes:
        switch = PRIMITIVES[node.op].switch if node.op not in ("var", "const") else None
        if switch is not None:
            with np.errstate(all="ignore"):
                s = switch(np, *(values[a] for a in node.args))
            rows.append(np.broadcast_to(np.sign(s), (n,)))
    return np.array(rows)


def _same(a, b) -> np.ndarray:
    return np.all((a == b) | (np.isnan(a) & np.isnan(b)), axis=0)


def _candidates(ctx, graph, domain, rng):
    """(points: name -> (TRIES,) array, the input element each was drawn around) near the inputs."""
    base = dict(zip(graph.variables, np.broadcast_arrays(*(np.asarray(ctx.base[v], float)
                                                            for v in graph.variables))))
    size = next(iter(base.values())).size
    home = rng.integers(size, size=TRIES)
    points = {}
    for v, a in base.items():
        a = a.ravel()[home]
        d = domain.get(v) if isinstance(domain, dict) else domain
        if d is not None:
            points[v] = map_domain(rng.standard_normal(TRIES), d)
        else:
            u = rng.uniform(-SPREAD, SPREAD, TRIES)
            points[v] = np.where(a != 0, a * (1 + u), u)
    return base, points, home


def _at_points(ctx, graph, pairs: dict, domain) -> Outcome:
    rng = np.random.default_rng([ctx.seed, 29])
    base, points, home = _candidates(ctx, graph, domain, rng)
    size = next(iter(base.values())).size
    with np.errstate(all="ignore"):
        at_base = _signature(graph, node_values(graph, {v: a.ravel() for v, a in base.items()}), size)
        at_points = _signature(graph, node_values(graph, points), TRIES)
        finite = np.isfinite(np.broadcast_to(evaluate(graph, points)[0], (TRIES,)))
    rows = []
    for k in np.flatnonzero(_same(at_points, at_base[:, home]) & finite):
        point = {v: float(points[v][k]) for v in graph.variables}
        got, why = symbolic.evaluate_at(graph, point, [list(p) for p in pairs.values()], None, symbolic.DIGITS,
                                        "the derivative")
        if not why and all(r is not None and u is not None for r, u in got):
            rows.append((point, [(float(r), float(u)) for r, u in got]))
        if len(rows) == POINTS:
            break
    if not rows:
        return Outcome(notes=("grad= was compared at the inputs only: sympy did not reduce its difference "
                              "from the derivative to 0, and no random point near the inputs lies in the same "
                              "smooth piece of the expression",))
    return _judge_rows(ctx, pairs, rows)


def _judge_rows(ctx, pairs: dict, rows: list) -> Outcome:
    for j, name in enumerate(pairs):
        refs = np.array([r[1][j][0] for r in rows])
        typical = float(np.median(np.abs(refs)))
        for point, vals in rows:
            ref, user = vals[j]
            if abs(user - ref) > ctx.rtol * max(abs(ref), typical) + ctx.atol:
                at = ", ".join(f"{v}={x:.6g}" for v, x in point.items())
                rel = abs(user - ref) / abs(ref) if ref else float("inf")
                return Outcome(verdict=Verdict(
                    "fail", f"grad[{name!r}] = {ctx.spec.grad[name]} agrees with the derivative at the inputs but "
                            f"is not the derivative near them: at {at} it gives {user:.8g}, sympy's derivative "
                            f"{pairs[name][0]} gives {ref:.8g} (rel error {rel:.2g})"))
    return Outcome(notes=(f"grad= agrees with sympy's derivative at {len(rows)} random points near the inputs, "
                          "in the same smooth piece (sympy did not reduce their difference to 0)",))
