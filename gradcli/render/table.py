"""The rich rendering of a GradReport: symbolic derivative, one row per variable, one column per method."""
from __future__ import annotations

import math

import numpy as np


from gradcli.render.screen import Fit, Group, Table, Text
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
        # compact: the reference Jacobian's values, then one row per method; --full shows every entry
        if report.jacobian is not None:
            outputs = [f"f{i + 1}" for i in range(len(report.values))]
            parts.append(matrix_table(f"J ({report.reference})", outputs, report.variables, report.jacobian))
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


def _entry(report, name, i, k) -> tuple:
    """A method's entry (i, k): its value (or the method's status) and its relative error ("" for none)
    with the error's style."""
    m = report.methods[name]
    if m.jacobian is None:
        return Text(m.status, style=STATUS_STYLE.get(m.status, "")), "", ""
    if m.abs_error is None or name == report.reference:
        return Text(fmt_number(m.jacobian[i, k])), "", ""
    tol = m.tolerance[i, k] if m.tolerance is not None else None
    return Text(fmt_number(m.jacobian[i, k])), fmt_error(m.rel_error[i, k]), _error_style(m.abs_error[i, k], tol)


def entry_table(report, rows) -> Fit:
    """One row per matrix entry, one column per method: the value with its relative error beneath;
    where that is too wide, one row per method with each entry's value and error side by side; where
    that is too, one block per entry. ``rows`` is a list of (label, i, k)."""
    wide = Table()
    wide.add_column("")
    names = list(report.methods)
    for name in names:
        wide.add_column(method_header(report, name), justify="right", min_width=13)
    for label, i, k in rows:
        cells = []
        for name in names:
            value, err, style = _entry(report, name, i, k)
            cells.append(value.append(f"\n{err}", style=style) if err else value)
        wide.add_row(label, *cells)

    by_method = Table()
    by_method.add_column("method")
    for label, _, _ in rows:
        by_method.add_column(label, justify="right")
        by_method.add_column("rel err", justify="right")
    for name in names:
        cells = []
        for _, i, k in rows:
            value, err, style = _entry(report, name, i, k)
            cells += [value, Text(err, style=style)]
        by_method.add_row(method_header(report, name), *cells)
    return Fit(wide, by_method, wide)


def matrix_table(corner: str, rows: list, columns: list, matrix) -> Table:
    """A matrix's values (the reference Jacobian or Hessian), its rows and columns labelled, ``corner``
    naming it: the numbers the command is named for, in the compact layout too."""
    table = Table()
    table.add_column(corner)
    for name in columns:
        table.add_column(name, justify="right")
    for label, values in zip(rows, matrix):
        table.add_row(label, *(fmt_number(v) for v in values))
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


def direction_table(report, hvp: bool = False) -> Fit:
    """--direction: each method's directional derivative (and H·v) with its error against the reference;
    where that is too wide, a vector's entries one under another."""
    return Fit(_direction_table(report, hvp), _direction_table(report, hvp, stacked=True),
               _direction_table(report, hvp))


def _direction_table(report, hvp: bool, stacked: bool = False) -> Table:
    names = ", ".join(f"{v}={fmt_number(x, 6)}" for v, x in zip(report.variables, report.direction))
    table = Table(title=f"along v = ({names})", title_justify="left")
    sep = "\n" if stacked else ", "
    table.add_column("method")
    table.add_column("∇f·v" if not getattr(report, "vector", False) else "J·v", justify="right")
    table.add_column("rel error", justify="right")
    if hvp:
        table.add_column("H·v", justify="right")
        table.add_column("rel error", justify="right")
    for name, d in report.directional.items():
        row = [method_header(report, name), sep.join(fmt_number(x) for x in d.derivative),
               fmt_error(d.derivative_rel_error) or "—"]
        if hvp:
            row += ["—" if d.hvp is None else sep.join(fmt_number(x) for x in d.hvp),
                    fmt_error(d.hvp_rel_error) or "—"]
        table.add_row(*row)
    return table
