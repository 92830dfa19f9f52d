"""The check report's summary: one line per check at any width a terminal or a pipe has, the columns
that do not fit dropped (the failures' details keep them), and the error that made a check fail."""
import io

import numpy as np
import pytest

from gradcli.checks.result import CheckReport, CheckResult, Mismatch
from gradcli.render.check import render_check_report
from gradcli.render.screen import Screen, cell_len



def _report(n=12) -> CheckReport:
    checks = []
    for k in range(n):
        failed = k % 3 == 1
        r = CheckResult(name=f"attention_scores_variant_{k}_missing_transpose",
                        file=f"examples/jax/models/deep/file{k}.py", line=10 + k, kind="vjp", status="fail" if failed else "pass", reference="jax_autodiff",
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


def _graded(e, a):
    """f = sum(a x^2) / 2 at x = 1, whose gradient a x is given with relative errors ``e``."""
    from gradcli.checks.registry import build_spec
    from gradcli.checks.runner import run_check

    spec = build_spec(lambda x: 0.5 * np.sum(a * x ** 2), grad=lambda x: a * x * (1 + e), x=np.ones(a.size))
    return run_check(spec, {})


def test_the_details_show_the_largest_relative_error_and_say_of_how_many():
    """12 wrong entries: 11 of size 1 off by 20-70 %, one of size 1e-3 off by 5000 % (the largest relative
    error, the least far past a tolerance scaled by the typical entry): the details show the 5 furthest
    past their tolerance, and that one too, under a title that says so."""
    from gradcli.render.check import headline, result_text

    a, e = np.ones(20), np.zeros(20)
    e[:11] = np.linspace(0.2, 0.7, 11)
    a[15], e[15] = 1e-3, 50.0
    r = _graded(e, a)
    assert r.status == "fail" and r.max_rel_error == pytest.approx(50.0)
    assert headline(r) == "x: 12 of 20 entries wrong, max rel err 5.0e+01"
    lines = result_text(r).splitlines()
    title = "the 5 entries furthest past their tolerance, of 12 wrong, and the one with the largest relative error"
    assert title in lines
    rows = [line.split() for line in lines[lines.index(title) + 2:] if line.startswith("  x")]
    assert [row[1] for row in rows] == ["[10]", "[9]", "[8]", "[7]", "[6]", "[15]"]
    assert rows[-1][-1] == "5.0e+01"
    # the terminal report shows the same entries
    out = _render(CheckReport(checks=[r]), 200)
    assert title in out and "[15]" in out


def test_no_title_when_every_wrong_entry_is_shown():
    from gradcli.render.check import result_text

    e = np.zeros(6)
    e[:3] = [0.5, 0.3, 0.2]
    r = _graded(e, np.ones(6))
    assert r.status == "fail" and len(r.mismatches) == 3
    assert "furthest past" not in result_text(r)


def test_file_names_give_room_back_to_dropped_columns():
    """Too narrow for the paths: the file names alone, and the kind and reference back where they fit."""
    checks = [CheckResult(name=n, file=f"examples/bugs/{f}.py", line=9, kind="vjp", status="fail", mode="full",
                          reference="traced_reverse", max_abs_error=1.5, max_rel_error=10.0)
              for n, f in [("linear", "missing_transpose"), ("layernorm", "eps_mismatch")]]
    header = _render(CheckReport(checks=checks), 80).splitlines()[1]
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["status", "check", "where", "kind", "max rel err"]
    out = _render(CheckReport(checks=checks), 75).splitlines()
    assert [c.strip() for c in out[1].strip("┃").split("┃")] == ["status", "check", "where", "kind", "rel err"]
    assert "missing_transpose.py:9" in out[3] and "examples/bugs/" not in out[3]
