"""A kernel check's compared quantities as a table (``reference=`` checks; gradcli.checks.kernels.criterion)."""
from __future__ import annotations

from gradcli.render.screen import Table, Text
from gradcli.render.table import fmt_error


def _digits(d) -> str:
    return "exact" if d is None else f"{d:.1f}"


def kernel_table(r) -> Table:
    """One row per quantity (the output, each input's gradient): the kernel's error against float64, the
    same-dtype reference's, what was allowed, and the digits of each at the quantity's scale."""
    table = Table()
    for col in ("quantity", "kernel err", f"{r.dtype} ref err", "allowed", "kernel digits", "ref digits", ""):
        table.add_column(col, justify="left" if col in ("quantity", "") else "right")
    for q in r.kernel:
        mark = Text("ok") if q.passed else Text("too large", style="red")
        table.add_row(q.name, fmt_error(q.kernel_error), fmt_error(q.reference_error), fmt_error(q.allowed),
                      _digits(q.digits(q.kernel_error)), _digits(q.digits(q.reference_error)), mark)
    return table
