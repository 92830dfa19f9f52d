"""The rich rendering of a HessianReport: second derivatives, each method's error and symmetry (or its
full matrix), eigenvalues and definiteness, the directional derivative and H·v, the verdict."""
from __future__ import annotations


from gradcli.render.screen import Group, Text
from gradcli.verdict.report import HessianReport
from gradcli.render.table import (
    direction_table, entry_table, fmt_exact, fmt_number, header, method_table, notes_and_verdict, truncate)

DEFINITENESS_TEXT = {
    "minimum": "positive definite",
    "maximum": "negative definite",
    "saddle": "indefinite",
    "degenerate": "singular: the second-derivative test is inconclusive",
}
# what the Hessian's sign says about the point, which only holds where the gradient vanishes
CRITICAL_TEXT = {"minimum": "a local minimum", "maximum": "a local maximum", "saddle": "a saddle point"}


def definiteness_text(report: HessianReport) -> str:
    text = DEFINITENESS_TEXT[report.definiteness]
    critical = CRITICAL_TEXT.get(report.definiteness)
    grad = [g for g in report.gradient.values() if g is not None]
    if critical and grad and all(g == 0 for g in grad):
        return f"{text}: {critical}"
    if critical:
        return f"{text}; the gradient is not zero here, so this is not {critical}"
    return text


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

    parts.append(method_table(report, [("asymmetry", symmetry_cell)]))
    if full:
        parts.append(entry_table(report, [(_label(report, i, k), i, k) for i in range(n) for k in range(n)]))

    if report.eigenvalues is not None and report.definiteness is not None:
        eig = Text()
        eig.append("eigenvalues: ", style="bold")
        eig.append(", ".join(fmt_number(v, 8) for v in report.eigenvalues) + "\n")
        eig.append("definiteness: ", style="bold")
        eig.append(report.definiteness, style="bold")
        eig.append(f" ({definiteness_text(report)})")
        parts.append(eig)
    if report.direction is not None:
        parts.append(direction_table(report, hvp=True))
    parts.extend(notes_and_verdict(report))
    return Group(*parts)
