"""The check report's summary: one line per check at any width a terminal or a pipe has, the columns
that do not fit dropped (the failures' details keep them), and the error that made a check fail."""
import io

import pytest

from gradcli.checks.result import CheckReport, CheckResult, Mismatch
from gradcli.render.check import render_check_report
from gradcli.render.screen import Screen, cell_len

BOX = set("┏┳┓┃┡━╇┩│└─┴┘")


def _report(n=12) -> CheckReport:
    checks = []
    for k in range(n):
        failed = k % 3 == 1
        r = CheckResult(name=f"attention_scores_variant_{k}_missing_transpose", file=f"examples/jax/models/deep/file{k}.py",
                        line=10 + k, kind="vjp", status="fail" if failed else "pass", reference="jax_autodiff",
                        mode="full", max_abs_error=0.5 * (k + 1) if failed else 1e-16,
                        max_rel_error=2.0 * (k + 1) if failed else 3e-15)
        if failed:
            r.message = f"x: {k} of 9 entries wrong"
            r.mismatches = [Mismatch("x", (0, k), 1.0, 3.0, 2.0, 2.0)]
        checks.append(r)
    return CheckReport(checks=checks)


def _render(report, width):
    return Screen(io.StringIO(), width=width, color=False, wrap=False).render(render_check_report(report))


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_one_line_per_check_at_every_width(width):
    report = _report()
    out = _render(report, width).splitlines()
    table = out[:next(i for i, line in enumerate(out) if line.startswith("└")) + 1]  # the summary
    assert max(cell_len(line) for line in table) <= width
    rows = [line for line in table if line.startswith("│")]
    assert len(rows) == len(report.checks)
    for r, row in zip(report.checks, rows):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[0] == {"pass": "PASS", "fail": "FAIL"}[r.status]
        name = cells[1]
        assert name == r.name or (name.endswith("…") and r.name.startswith(name[:-1]))
        assert f"{r.max_rel_error:.1e}" in cells
    # the failures' details name the whole place and kind, whatever the summary dropped
    for r in report.checks:
        if r.status == "fail":
            assert f"FAIL {r.name} ({r.file}:{r.line}, vjp, full)" in out


def test_a_wide_screen_shows_every_column():
    report = _report(3)
    out = _render(report, 200)
    header = out.splitlines()[1]
    for col in ("status", "check", "where", "kind", "max abs err", "max rel err", "reference"):
        assert col in header
    r = report.checks[1]
    row = next(line for line in out.splitlines() if r.name in line)
    assert f"{r.file}:{r.line}" in row and f"{r.max_abs_error:.1e}" in row and "jax_autodiff" in row


def test_columns_drop_in_order_before_anything_is_cut():
    report = _report(3)
    full = _render(report, 200).splitlines()[1]
    # a few columns short of the full table (its edge spaces go first): the absolute error goes, the rest stays
    narrower = _render(report, cell_len(full) - 3).splitlines()[1]
    assert "max abs err" in full and "max abs err" not in narrower and "reference" in narrower
    assert "…" not in _render(report, cell_len(full) - 3)
