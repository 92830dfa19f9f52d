"""The terminal rendering of a HessianReport: second derivatives, the reference Hessian's values, each
method's error and symmetry (or with --full every method's matrix), eigenvalues and definiteness, the
directional derivative and H·v, the verdict."""
from __future__ import annotations

import numpy as np

from gradcli.core.constants import ROUNDING_SAFETY
from gradcli.render.screen import Group, Text
from gradcli.verdict.report import HessianReport
from gradcli.render.table import (
    direction_table, entry_table, fmt_exact, fmt_number, header, matrix_table, method_table, notes_and_verdict,
    truncate)

DEFINITENESS_TEXT = {"minimum": "positive definite", "maximum": "negative definite", "saddle": "indefinite",
                     "degenerate": "singular"}
# what the Hessian's sign says about the point, which only holds where the gradient vanishes
CRITICAL_TEXT = {"minimum": "a local minimum", "maximum": "a local maximum", "saddle": "a saddle point",
                 "degenerate": "the second-derivative test is inconclusive"}
NOT_CRITICAL = "not a critical point: the gradient is not zero"


def at_critical_point(report: HessianReport) -> bool:
    """Whether the gradient is zero within its error: within what moving each coordinate by one ulp
    changes it (|H| times the point's spacing, with rounding's safety), the precision to which a
    float64 point can sit on a critical point at all (sin(x) at the float nearest pi/2 has 6e-17)."""
    g, H = report.gradient_reference, report.hessian
    if g is None or H is None or not (np.isfinite(g).all() and np.isfinite(H).all()):
        return False
    x = np.array([report.point[v] for v in report.variables], dtype=float)
    return bool(np.all(np.abs(g) <= ROUNDING_SAFETY * (np.abs(H) @ np.spacing(np.abs(x)))))


def definiteness_text(report: HessianReport) -> tuple:
    """(what the Hessian is, what that says of the point): ("indefinite", "a saddle point") where the
    gradient is zero, ("indefinite", "not a critical point: ...") elsewhere."""
    note = CRITICAL_TEXT[report.definiteness] if at_critical_point(report) else NOT_CRITICAL
    return DEFINITENESS_TEXT[report.definiteness], note


def _label(report: HessianReport, i: int, k: int) -> str:
    a, b = report.variables[i], report.variables[k]
    return f"∂²f/∂{a}²" if i == k else f"∂²f/∂{a}∂{b}"


def render_hessian(report: HessianReport, full: bool = False) -> Group:
    """By default one row per method (status, largest error, symmetry); ``full`` adds every entry."""
    parts = []
    head = header(report.variables, report.expression, report.point)
    head.append(f"value: {fmt_exact(report.value)}\n")
    grad = ", ".join(fmt_number(g) for g in report.gradient.values())
    head.append(f"gradient: ({grad})")
    parts.append(head)

    n = len(report.variables)
    if report.symbolic:
        sym = Text()
        for i in range(n):
            for k in range(i, n):
                sym.append(f"{_label(report, i, k)} = ", style="bold")
                sym.append(truncate(report.symbolic[i][k]) + "\n")
        parts.append(sym)

    def symmetry_cell(name, m):
        s = report.symmetry.get(name)
        return Text("—" if s is None else ("0" if s == 0 else f"{s:.1e}"),
                    style="dim" if s is None else "green" if s < 1e-10 else "yellow")

    # --full shows every method's entries instead; a matrix undefined throughout has no numbers to show
    if report.hessian is not None and np.isfinite(report.hessian).any() and not full:
        parts.append(matrix_table(f"H ({report.reference})", report.variables, report.variables, report.hessian))
    parts.append(method_table(report, [("asymmetry", symmetry_cell)]))
    if full:
        parts.append(entry_table(report, [(_label(report, i, k), i, k) for i in range(n) for k in range(n)]))

    if report.eigenvalues is not None and report.definiteness is not None:
        eig = Text()
        eig.append("eigenvalues: ", style="bold")
        eig.append(", ".join(fmt_number(v, 8) for v in report.eigenvalues) + "\n")
        eig.append("definiteness: ", style="bold")
        kind, note = definiteness_text(report)
        eig.append(kind, style="bold")
        eig.append(f" ({note})")
        parts.append(eig)
    if report.direction is not None:
        parts.append(direction_table(report, hvp=True))
    parts.extend(notes_and_verdict(report))
    return Group(*parts)
