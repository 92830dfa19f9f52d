"""Where float64, not the derivative, is the problem: the program as written loses the digits a comparison
needs (``ill_conditioned``), or loses some and leaves enough (a note), for grad and hessian alike.

``undefined`` and ``nondifferentiable`` are for points where the mathematical derivative does not exist;
here it exists (the symbolic reference has it to 35 digits) and every method differentiates a float64
program that cannot resolve it. Rounding is measured, not guessed: ``spread`` is how far one more ulp of
rounding per operation moves AD's result, ``input_spread`` how far one ulp of the inputs and constants
does (the precision the point itself allows), and the operation whose rounding moves it most is named.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.core.constants import FLOAT64_DIGITS, NOTE_LOST_DIGITS
from gradcli.core.graph import Graph, text_of, walk
from gradcli.core.primitives import NumericOps
from gradcli.verdict import tolerance as vt
from gradcli.verdict.report import Diagnostic

EPS = float(np.finfo(np.float64).eps)
#: An addition whose terms are this many times its result cancels: it is named as where digits go.
CANCELS = 1e3


def lost_digits(spread, ref) -> np.ndarray:
    """Digits of float64's :data:`FLOAT64_DIGITS` that rounding takes from each entry (0 to all of them)."""
    with np.errstate(all="ignore"):
        lost = np.log10(np.nan_to_num(spread) / (EPS * np.abs(ref)))
    return np.clip(np.nan_to_num(lost, nan=0.0, posinf=FLOAT64_DIGITS), 0, FLOAT64_DIGITS)


def route_spread(spread, results: dict, routes) -> np.ndarray:
    """The rounding spread, widened to how far the AD ``routes`` that ran differ from each other: in exact
    arithmetic they are the same number, so their difference is rounding too, and one route's Monte
    Carlo spread need not see another's (reverse over forward of t/t at 1e-8 cancels 1e16 to 2 where
    forward over forward is exact)."""
    mats = [results[n].jacobian for n in routes if n in results and results[n].jacobian is not None]
    with np.errstate(invalid="ignore"):
        for a in mats:
            for b in mats:
                spread = np.fmax(spread, np.abs(a - b))
    return spread


def classify(graph: Graph, point: dict, ref, scale, spread, input_spread, ad: dict, culprits, diags: list, bad,
             label, exact: bool = True) -> np.ndarray:
    """The entries float64 cannot resolve -> a mask, with an ``ill_conditioned`` diagnostic for each, a
    ``precision`` note for each entry that keeps enough digits but loses :data:`NOTE_LOST_DIGITS` or more,
    and entries beyond float64's range added to ``bad``. ``ad`` maps each AD route to its matrix (what
    the program as written gives), ``input_spread`` how far one ulp of the inputs and constants moves it and where
    smoothly (:func:`gradcli.methods.forward.input_spread`), ``culprits()`` the operation per entry
    whose rounding moves it most (None: unknown), ``exact`` whether ``ref`` is the exact reference (then
    only where AD really lost the digits),
    ``label(i, k)`` names entry (i, k) ("df/dx")."""
    ill = np.zeros(np.shape(bad), dtype=bool)
    if ref is None:
        return ill
    with np.errstate(all="ignore"):
        off = np.zeros_like(ref)  # how far AD really is from the exact value
        for m in ad.values():
            off = np.fmax(off, np.abs(m - ref))
        actual = off if exact and ad else None
        ill = vt.ill_conditioned(np, ref, scale, spread, input_spread, actual) & ~bad
        # resolved only to the point's own ulp (a stationary point), judged absolutely
        absolute = vt.ill_conditioned(np, ref, scale, spread, None, actual) & ~bad & ~ill
        # what rounding can do or, where AD did worse than its spread says, what it did
        moved = np.fmax(np.nan_to_num(spread), np.nan_to_num(off))
        lost = lost_digits(moved, ref)
        noted = np.isfinite(ref) & (ref != 0) & ~bad & ~ill & ~absolute & (lost >= NOTE_LOST_DIGITS)
    for i, k in zip(*np.nonzero(absolute & (ref != 0))):
        diags.append(Diagnostic("precision", "float64", (
            f"{label(i, k)} is {ref[i, k]:.3g}, below what float64 resolves at this point (one ulp of its "
            f"coordinates moves it by {input_spread[0][i, k]:.2g}): the methods are judged to that scale")))
    who = culprits() if (ill.any() or noted.any()) else None
    why = _Why(graph, point)
    for i, k in zip(*np.nonzero(ill)):
        cause = why(None if who is None else int(who[i, k]))
        n = int(round(lost[i, k]))
        digits = "all of float64's digits" if moved[i, k] >= abs(ref[i, k]) or n >= FLOAT64_DIGITS else f"{n} of float64's {FLOAT64_DIGITS} digits"
        diags.append(Diagnostic("ill_conditioned", cause.op, (
            f"{label(i, k)} exists, but the program as written loses {digits} of it here{cause.text}: one "
            f"more ulp of rounding per operation moves it by {spread[i, k]:.2g} against {abs(ref[i, k]):.3g}. "
            f"The exact derivative is {ref[i, k]:.12g}; AD of the program gives {_ad_values(ad, i, k)} (AD is "
            f"exact for the program as written: the digits are lost in the program){cause.hint}")))
    for i, k in zip(*np.nonzero(noted)):
        cause = why(None if who is None else int(who[i, k]))
        diags.append(Diagnostic("precision", cause.op, (
            f"{label(i, k)}: the program as written loses about {int(round(lost[i, k]))} of float64's "
            f"{FLOAT64_DIGITS} digits here{cause.text}; AD is exact for the program as written, and the "
            f"comparison keeps enough digits{cause.hint}")))
    # a finite exact derivative beyond float64's range (sqrt(x)*1e150 at 1e-320): no method can give it
    over = np.isinf(ref) & ~bad
    for i, k in zip(*np.nonzero(over)):
        diags.append(Diagnostic("ill_conditioned", "float64", (
            f"{label(i, k)} is finite but beyond float64's range here (overflow: above 1.8e308 in size)")))
    bad |= over
    return ill


def _ad_values(ad: dict, i, k) -> str:
    """AD's value of entry (i, k), or each route's where they differ."""
    vals = {name: float(m[i, k]) for name, m in ad.items()}
    if len(set(vals.values())) <= 1:
        return f"{next(iter(vals.values()), float('nan')):.12g}"
    return ", ".join(f"{v:.12g} ({name})" for name, v in vals.items())


class _Cause:
    def __init__(self, op="float64", text="", hint=""):
        self.op, self.text, self.hint = op, text, hint


class _Why:
    """The words for where digits go, from the operation whose rounding moves the entry most: the
    cancellation downstream of it that amplifies that rounding, or else the operation itself."""

    def __init__(self, graph: Graph, point: dict):
        self.graph, self.point = graph, point
        self._values = None

    def values(self):
        if self._values is None:
            with np.errstate(all="ignore"):
                self._values = walk(self.graph, NumericOps(), {v: np.float64(x) for v, x in self.point.items()},
                                    keep=True)
        return self._values

    def __call__(self, culprit) -> _Cause:
        if culprit is None or culprit < 0:
            return _Cause()
        g, vals = self.graph, self.values()
        downstream = g.depends_on(nodes=[culprit])
        best, ratio = None, CANCELS
        for i, n in enumerate(g.nodes):
            if downstream[i] and n.op in ("add", "sub"):
                r = _cancellation(*(float(vals[a]) for a in n.args), float(vals[i]))
                if r > ratio:
                    best, ratio = i, r
        if best is not None:
            size = "it cancels to 0" if math.isinf(ratio) else f"its terms are {ratio:.2g} times its value"
            return _Cause(g.nodes[best].op, f" to the cancellation in {text_of(g, best)} ({size})", _hint(g, best))
        return _Cause(g.nodes[culprit].op, f" to the rounding of {text_of(g, culprit)}", _hint(g, culprit))


def _cancellation(a, b, total) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(total)):
        return 0.0
    terms = abs(a) + abs(b)
    return math.inf if total == 0 and terms > 0 else (terms / abs(total) if total else 0.0)


def _hint(g: Graph, i: int) -> str:
    """A rewrite that keeps the digits, for the forms that have one."""
    n = g.nodes[i]
    one = lambda j: g.nodes[j].op == "const" and g.nodes[j].attr.value == 1.0

    def head(j, op):
        return g.nodes[j].op == op
    if n.op == "sub" and head(n.args[0], "exp") and one(n.args[1]):
        return f"; expm1({text_of(g, g.nodes[n.args[0]].args[0])}) keeps them"
    if n.op == "sub" and one(n.args[0]) and head(n.args[1], "cos"):
        a = text_of(g, g.nodes[n.args[1]].args[0])
        return f"; 2*sin({a if a.replace('.', '').isalnum() else f'({a})'}/2)**2 keeps them"
    if n.op == "add" and (one(n.args[0]) or one(n.args[1])):
        if any(g.nodes[c].op == "log" for c in g.consumers()[i]):
            other = n.args[1] if one(n.args[0]) else n.args[0]
            return f"; log1p({text_of(g, other)}) keeps them"
    return ""
