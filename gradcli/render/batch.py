"""The rich rendering of a BatchReport: one row per method, the worst points, the verdict."""
from __future__ import annotations


from gradcli.render.screen import Fit, Group, Table, Text
from gradcli.batch.report import BatchReport
from gradcli.render.table import STATUS_STYLE, VERDICT_MARK, VERDICT_STYLE, fmt_error, fmt_number, truncate


def _rate(points: int, seconds: float) -> str:
    if seconds <= 0:
        return "—"
    r = points / seconds
    return f"{r:.3g}"


def _point(p: dict) -> str:
    return truncate(", ".join(f"{k}={v!r}" for k, v in p.items()))


def _worst_table(report: BatchReport, stacked: bool = False) -> Table:
    """The worst points; ``stacked`` puts each point under its method (a narrower table)."""
    worst = Table(title="worst points (error / tolerance)")
    cols = [("method / point", "left")] if stacked else [("method", "left"), ("point", "left")]
    for col, justify in cols + [("entry", "left"), ("got", "right"), ("reference", "right"),
                                ("rel err", "right"), ("err/tol", "right")]:
        worst.add_column(col, justify=justify)
    for w in report.worst:
        ratio = (w["abs_error"] / w["tolerance"]) if w.get("tolerance") else float("inf")
        style = "bold red" if w["status"] == "mismatch" else ""
        where = [Text(w["method"]).append(f"\n{_point(w['point'])}", style="dim")] if stacked else [
            w["method"], _point(w["point"])]
        worst.add_row(*where, w["entry"], fmt_number(w["got"]), fmt_number(w["ref"]),
                      Text(fmt_error(w["rel_error"]) or "—", style=style), Text(f"{ratio:.2g}", style=style))
    return worst


def render_batch(report: BatchReport) -> Group:
    parts = []
    head = Text()
    head.append("f", style="bold")
    head.append(f"({truncate(', '.join(report.variables))}) = {truncate(report.expression)}\n")
    if "domain" in report.source:
        where = ", ".join(f"{k} in [{lo:g}, {hi:g})" for k, (lo, hi) in report.source["domain"].items())
        head.append(f"{report.points} uniform points, {where} (seed {report.source.get('seed', 0)})\n")
    elif "points_file" in report.source:
        head.append(f"{report.points} points from {report.source['points_file']}\n")
    else:
        head.append(f"{report.points} points\n")
    head.append(f"device {report.device}, {report.dtype}, chunks of {report.chunk}; reference: {report.reference}")
    parts.append(head)

    table = Table()
    for col, justify in (("method", "left"), ("max rel err", "right"), ("median rel err", "right"),
                         ("agree", "right"), ("undefined", "right"), ("unavailable", "right"),
                         ("seconds", "right"), ("points/s", "right")):
        table.add_column(col, justify=justify)
    for name, m in report.methods.items():
        label = Text(f"{name}{' (ref)' if m.reference else ''}", style=STATUS_STYLE.get(m.status, ""))
        if m.reference or m.status == "unavailable" and not m.compared:
            table.add_row(label, "", "", Text(m.status if not m.reference else "reference",
                                              style=STATUS_STYLE.get(m.status, "")),
                          str(m.undefined) if m.reference else "", "", f"{m.seconds:.3g}",
                          _rate(report.points, m.seconds))
            continue
        frac = m.agree_fraction
        agree = Text("—" if frac is None else f"{100 * frac:.4g}%",
                     style="green" if frac == 1.0 else "bold red" if m.mismatched else "")
        table.add_row(label, fmt_error(m.max_rel_error) or "—", fmt_error(m.median_rel_error) or "—", agree,
                      str(m.undefined), str(m.unavailable), f"{m.seconds:.3g}", _rate(report.points, m.seconds))
    parts.append(table)

    if report.worst:
        parts.append(Fit(_worst_table(report), _worst_table(report, stacked=True), _worst_table(report)))

    notes = Text()
    for name, m in report.methods.items():
        if m.message:
            notes.append(f"{name}: ", style=STATUS_STYLE.get(m.status, ""))
            notes.append(f"{m.message}\n")
    for d in report.diagnostics:
        ex = _point(d["example"])
        notes.append(f"{d['kind']}: ", style="yellow")
        notes.append(f"{d['count']} point(s): {d['message']} (e.g. {ex})\n")
    for note in report.notes:
        notes.append(f"note: {note}\n")
    if report.median == "histogram":
        notes.append("note: medians from a log10 histogram (1/40 decade bins): about 3% accurate\n")
    if notes:
        notes.rstrip()
        parts.append(notes)

    verdict = Text()
    verdict.append(f"{VERDICT_MARK.get(report.status, '?')} {report.status}", style=VERDICT_STYLE.get(report.status))
    verdict.append(f": {report.message}" if report.message else "")
    rate = report.points_per_second
    verdict.append(f" ({report.seconds:.3g} s, {rate:.3g} points/s)" if rate else "")
    parts.append(verdict)
    return Group(*parts)
