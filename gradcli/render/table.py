"""The rich rendering of a GradReport: symbolic derivative, one row per variable, one column per method."""
from __future__ import annotations

import math

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..report import GradReport

STATUS_STYLE = {"ok": "green", "mismatch": "bold red", "undefined": "yellow", "unavailable": "dim",
                "error": "bold red"}
VERDICT_STYLE = {"agree": "bold green", "disagree": "bold red", "undefined": "bold yellow",
                 "nondifferentiable": "bold yellow"}
VERDICT_MARK = {"agree": "✓", "disagree": "✗", "undefined": "!", "nondifferentiable": "!"}
MAX_SYMBOLIC_CHARS = 400


def fmt_number(v, digits: int = 11) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    v = float(v)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def fmt_exact(v) -> str:
    """The shortest text that reads back as the same float."""
    return "undefined" if v is None else repr(float(v))


def fmt_error(e) -> str:
    if e is None or not math.isfinite(e):
        return ""
    return "0" if e == 0 else f"{e:.1e}"


def _error_style(err, tol) -> str:
    if err is None or not math.isfinite(err):
        return "dim"
    if tol is not None and err > tol:
        return "bold red"
    return "green" if err < 1e-12 else "cyan" if err < 1e-8 else "yellow"


def _truncate(text: str) -> str:
    return text if len(text) <= MAX_SYMBOLIC_CHARS else text[:MAX_SYMBOLIC_CHARS] + f" … ({len(text)} chars)"


def _label(report: GradReport, out: int, var: str) -> str:
    return f"∂f{out + 1}/∂{var}" if report.vector else f"∂f/∂{var}"


def render_grad(report: GradReport) -> Group:
    parts = []
    head = Text()
    head.append("f", style="bold")
    head.append(f"({_truncate(', '.join(report.variables))}) = {_truncate(report.expression)}\n")
    point = _truncate(", ".join(f"{k} = {fmt_exact(v)}" for k, v in report.point.items()))
    head.append(f"at {point}\n" if point else "")
    values = ", ".join(fmt_exact(v) for v in report.values)
    head.append(f"value: {values}")
    parts.append(head)

    if report.symbolic:
        sym = Text()
        for i, row in enumerate(report.symbolic):
            for var, d in zip(report.variables, row):
                sym.append(f"{_label(report, i, var)} = ", style="bold")
                sym.append(_truncate(d) + "\n")
        parts.append(sym)

    table = Table(show_lines=False, header_style="bold", pad_edge=False)
    table.add_column("", no_wrap=True)
    names = list(report.methods)
    for name in names:
        m = report.methods[name]
        ref = " (ref)" if name == report.reference else ""
        table.add_column(Text(f"{name}{ref}", style=STATUS_STYLE.get(m.status, "")), justify="right",
                         no_wrap=True, min_width=13)
    nout = len(report.values)
    for i in range(nout):
        for k, var in enumerate(report.variables):
            cells = []
            for name in names:
                m = report.methods[name]
                if m.jacobian is None:
                    cells.append(Text(m.status, style=STATUS_STYLE.get(m.status, "")))
                    continue
                cell = Text(fmt_number(m.jacobian[i, k]))
                if m.abs_error is not None and name != report.reference:
                    rel = m.rel_error[i, k]
                    tol = m.tolerance[i, k] if m.tolerance is not None else None
                    err = fmt_error(rel)
                    if err:
                        cell.append(f"\n{err}", style=_error_style(m.abs_error[i, k], tol))
                cells.append(cell)
            table.add_row(_label(report, i, var), *cells)
    parts.append(table)

    notes = Text()
    for name, m in report.methods.items():
        if m.message and m.status != "ok":
            notes.append(f"{name}: ", style=STATUS_STYLE.get(m.status, ""))
            notes.append(f"{m.message}\n")
    for d in report.diagnostics:
        if d.message == report.message:
            continue  # the verdict line says it
        notes.append(f"{d.kind}: ", style="yellow")
        notes.append(f"{d.message}\n")
    if notes:
        parts.append(notes)

    verdict = Text()
    verdict.append(f"{VERDICT_MARK.get(report.status, '?')} {report.status}", style=VERDICT_STYLE.get(report.status))
    verdict.append(f": {report.message}" if report.message else "")
    parts.append(verdict)
    return Group(*parts)
