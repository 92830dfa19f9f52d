"""The rich rendering of a GradReport: symbolic derivative, one row per variable, one column per method."""
from __future__ import annotations

import math

import numpy as np


from gradcli.render.screen import Group, Table, Text
from gradcli.verdict.report import GradReport

STATUS_STYLE = {"ok": "green", "mismatch": "bold red", "undefined": "yellow", "unavailable": "dim",
                "error": "bold red"}
VERDICT_STYLE = {"agree": "bold green", "disagree": "bold red", "undefined": "bold yellow",
                 "nondifferentiable": "bold yellow", "ill_conditioned": "bold yellow"}
VERDICT_MARK = {"agree": "✓", "disagree": "✗", "undefined": "!", "nondifferentiable": "!", "ill_conditioned": "!"}
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
    if e is not None and e == math.inf:
        return "inf"  # a nonzero value where 0 was expected
    if e is None or not math.isfinite(e):
        return ""
    return "0" if e == 0 else f"{e:.1e}"


def _error_style(err, tol) -> str:
    if err is None or not math.isfinite(err):
        return "dim"
    if tol is not None and err > tol:
        return "bold red"
    return "green" if err < 1e-12 else "cyan" if err < 1e-8 else "yellow"


def truncate(text: str) -> str:
    """A long symbolic text cut to what a table can show, saying how long it was."""
    return text if len(text) <= MAX_SYMBOLIC_CHARS else text[:MAX_SYMBOLIC_CHARS] + f" … ({len(text)} chars)"


def _label(report: GradReport, out: int, var: str) -> str:
    return f"∂f{out + 1}/∂{var}" if report.vector else f"∂f/∂{var}"


def _worst(report: GradReport, m) -> str:
    if m.rel_error is None or not np.isfinite(m.rel_error).any():
        return ""
    i, k = np.unravel_index(np.nanargmax(np.where(np.isfinite(m.rel_error), m.rel_error, np.nan)), m.rel_error.shape)
    return _label(report, i, report.variables[k])


def header(variables, expression: str, point: dict) -> Text:
    """``f(x, y) = EXPR`` and ``at x = .., y = ..``: the first lines of every point report."""
    head = Text()
    head.append("f", style="bold")
    head.append(f"({truncate(', '.join(variables))}) = {truncate(expression)}\n")
    at = truncate(", ".join(f"{k} = {fmt_exact(v)}" for k, v in point.items()))
    head.append(f"at {at}\n" if at else "")
    return head


def render_grad(report: GradReport, full: bool = False) -> Group:
    """The grad table: one row per variable (scalar expression); for a vector-valued one, one row per
    method with its largest error, or with ``full`` one row per Jacobian entry."""
    parts = []
    head = header(report.variables, report.expression, report.point)
    values = ", ".join(fmt_exact(v) for v in report.values)
    head.append(f"value: {values}")
    parts.append(head)

    if report.symbolic:
        sym = Text()
        for i, row in enumerate(report.symbolic):
            for var, d in zip(report.variables, row):
                sym.append(f"{_label(report, i, var)} = ", style="bold")
                sym.append(truncate(d) + "\n")
        parts.append(sym)

    if report.vector and not full:
        # compact: one row per method; --full shows every entry
        parts.append(method_table(report, [("worst entry", lambda name, m: "" if name == report.reference else _worst(report, m))]))
    else:
        rows = [(_label(report, i, var), i, k) for i in range(len(report.values))
                for k, var in enumerate(report.variables)]
        parts.append(entry_table(report, rows))
    if report.direction is not None:
        parts.append(direction_table(report))
    parts.extend(notes_and_verdict(report))
    return Group(*parts)


def notes_and_verdict(report) -> list:
    """The methods' messages, the diagnostics the verdict does not repeat, and the verdict line
    (any single-point report: grad or hessian)."""
    parts = []
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
    return parts


def method_header(report, name) -> Text:
    m = report.methods[name]
    ref = " (ref)" if name == report.reference else ""
    return Text(f"{name}{ref}", style=STATUS_STYLE.get(m.status, ""))


def entry_table(report, rows) -> Table:
    """One row per matrix entry, one column per method: the value with its relative error beneath.
    ``rows`` is a list of (label, i, k)."""
    table = Table()
    table.add_column("")
    names = list(report.methods)
    for name in names:
        table.add_column(method_header(report, name), justify="right", min_width=13)
    for label, i, k in rows:
        cells = []
        for name in names:
            m = report.methods[name]
            if m.jacobian is None:
                cells.append(Text(m.status, style=STATUS_STYLE.get(m.status, "")))
                continue
            cell = Text(fmt_number(m.jacobian[i, k]))
            if m.abs_error is not None and name != report.reference:
                tol = m.tolerance[i, k] if m.tolerance is not None else None
                err = fmt_error(m.rel_error[i, k])
                if err:
                    cell.append(f"\n{err}", style=_error_style(m.abs_error[i, k], tol))
            cells.append(cell)
        table.add_row(label, *cells)
    return table


def method_table(report, extra=()) -> Table:
    """One row per method: status and largest relative error (plus ``extra`` columns: (title, fn(name, m)))."""
    table = Table()
    table.add_column("method")
    table.add_column("status")
    table.add_column("max rel error", justify="right")
    for title, _ in extra:
        table.add_column(title, justify="right")
    for name, m in report.methods.items():
        err = "" if name == report.reference else fmt_error(m.max_rel_error)
        bad = m.abs_error is not None and m.tolerance is not None and bool(
            (np.nan_to_num(m.abs_error) > m.tolerance).any()) and m.status == "mismatch"
        style = "bold red" if bad else ("green" if m.max_rel_error is not None and m.max_rel_error < 1e-12
                                        else "cyan")
        table.add_row(method_header(report, name), Text(m.status, style=STATUS_STYLE.get(m.status, "")),
                      Text(err or "—", style=style if err else "dim"), *(fn(name, m) for _, fn in extra))
    return table


def direction_table(report, hvp: bool = False) -> Table:
    """--direction: each method's directional derivative (and H·v) with its error against the reference."""
    names = ", ".join(f"{v}={fmt_number(x, 6)}" for v, x in zip(report.variables, report.direction))
    table = Table(title=f"along v = ({names})", title_justify="left")
    table.add_column("method")
    table.add_column("∇f·v" if not getattr(report, "vector", False) else "J·v", justify="right")
    table.add_column("rel error", justify="right")
    if hvp:
        table.add_column("H·v", justify="right")
        table.add_column("rel error", justify="right")
    for name, d in report.directional.items():
        row = [method_header(report, name), ", ".join(fmt_number(x) for x in d.derivative),
               fmt_error(d.derivative_rel_error) or "—"]
        if hvp:
            row += ["—" if d.hvp is None else ", ".join(fmt_number(x) for x in d.hvp),
                    fmt_error(d.hvp_rel_error) or "—"]
        table.add_row(*row)
    return table
