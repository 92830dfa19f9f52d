"""The rich rendering of a CheckReport: one row per check, details for every check that did not pass,
and a summary line. ``result_text`` is the same detail as plain text (JUnit, pytest)."""
from __future__ import annotations

import math
import re

from gradcli.render.screen import Group, Table, Text
from gradcli.checks.result import CheckReport, CheckResult
from gradcli.render.kernel import kernel_table
from gradcli.render.table import fmt_error, fmt_number

STATUS_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold red", "inconclusive": "bold magenta",
                "nondifferentiable": "bold yellow", "undefined": "bold yellow", "skipped": "dim"}
STATUS_LABEL = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "inconclusive": "INCONCLUSIVE",
                "nondifferentiable": "NONDIFF", "undefined": "UNDEFINED", "skipped": "SKIPPED"}
#: Order and wording of the summary line.
SUMMARY_WORDS = (("pass", "passed"), ("fail", "failed"), ("inconclusive", "inconclusive"), ("error", "error"),
                 ("nondifferentiable", "nondifferentiable"), ("undefined", "undefined"), ("skipped", "skipped"))
#: The worst elements shown per check (the JSON has all the runner kept).
MAX_SHOWN = 5


def where(r: CheckResult) -> str:
    return f"{r.file}:{r.line}" if r.line else r.file


def fmt_taylor(r: CheckResult) -> str:
    """The Taylor-test column: the fitted slope(s) and verdict, e.g. ``2.00 right``, ``2.00 right, 3.01 right``
    (order 2: the slope with the Hessian term second), ``exact`` (remainder at rounding level), ``—``."""
    parts = []
    for t in (r.taylor, r.taylor2):
        if t is None:
            continue
        if t.slope is None:
            parts.append("exact" if t.verdict == "right" else "?")
        else:
            parts.append(f"{t.slope:.2f} {'?' if t.verdict == 'undetermined' else t.verdict}")
    return ", ".join(parts) or "—"


def render_check_report(report: CheckReport, seconds: float | None = None, taylor: bool = False) -> Group:
    """The table, the details and the summary line (file errors are diagnostics: the CLI puts them
    on stderr; the summary line counts them). ``taylor`` adds the "taylor slope" column."""
    parts = []
    if report.checks:
        parts.append(ChecksTable(report, taylor))
    for r in report.checks:
        if r.status != "pass" or r.notes or r.digits:
            parts.append(render_details(r))
    parts.append(summary_line(report, seconds))
    return Group(*parts)


#: The summary's columns, the first dropped first when the table is too wide: one line per check at any
#: width, as pytest and ruff give one line per item; what is dropped is in every failure's details.
DROPPED_FIRST = ("max abs err", "reference", "taylor slope", "kind")
#: The narrowest a check's name or place is cut to (with an ellipsis) before the table goes to blocks.
MIN_NAME = 12


class ChecksTable:
    """One row per check: every column where the screen is wide enough, else the columns of
    ``DROPPED_FIRST`` dropped in turn, then the place cut to its file name (and the columns that then fit
    taken back), then it and the name cut short; a screen too narrow for even that gets one block per check."""

    def __init__(self, report: CheckReport, taylor: bool):
        self.report, self.taylor = report, taylor

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        dropped = set() if self.taylor else {"taylor slope"}
        table = _checks_table(self.report, dropped)
        for col in DROPPED_FIRST:
            if table.width() <= width:
                return table.lines(width, wrap_prose)
            dropped.add(col)
            table = _checks_table(self.report, dropped)
        table = _checks_table(self.report, dropped, short=True)
        # the file names leave room: the columns dropped last come back where they fit
        for col in reversed(DROPPED_FIRST):
            if col == "taylor slope" and not self.taylor:
                continue
            wider = _checks_table(self.report, dropped - {col}, short=True)
            if wider.width() <= width:
                dropped, table = dropped - {col}, wider
        names = max(len(r.name) for r in self.report.checks)
        places = max(len(_file_line(r)) for r in self.report.checks)
        over = table.width() - width
        if 0 < over <= max(names - MIN_NAME, 0) + max(places - MIN_NAME, 0):  # else blocks, which show both whole
            for _ in range(over):  # the longer of the two loses a column, the name on a tie
                if names >= places and names > MIN_NAME:
                    names -= 1
                else:
                    places -= 1
            table = _checks_table(self.report, dropped, short=True, name_width=names, where_width=places)
        return table.lines(width, wrap_prose)


def _file_line(r: CheckResult) -> str:
    return where(r).rsplit("/", 1)[-1]


def _cut(text: str, width: int | None, tail: bool = False) -> str:
    """``text`` cut to ``width`` with an ellipsis: its end kept where ``tail`` (a file name and line)."""
    if width is None or len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1:] if tail else text[:width - 1] + "…"


def _checks_table(report: CheckReport, dropped: set, short: bool = False, name_width: int | None = None,
                  where_width: int | None = None) -> Table:
    """The summary table without the ``dropped`` columns; ``short``: the file name and line alone, not
    the path, and "rel err" for "max rel err"; names and places longer than ``name_width`` and
    ``where_width`` cut short."""
    table = Table(heading_columns=2)
    rel = "rel err" if short else "max rel err"
    cols = [("status", "left"), ("check", "left"), ("where", "left"), ("kind", "left"),
            ("max abs err", "right"), (rel, "right"), ("reference", "left"), ("taylor slope", "right")]
    cols = [(c, j) for c, j in cols if c not in dropped]
    for col, justify in cols:
        table.add_column(col, justify=justify)
    for r in report.checks:
        cells = {"status": Text(STATUS_LABEL.get(r.status, r.status), style=STATUS_STYLE.get(r.status, "")),
                 "check": _cut(r.name, name_width), "where": _cut(_file_line(r), where_width, tail=True) if short
                 else where(r), "kind": r.kind + (" (order 2)" if r.order == 2 else ""),
                 "max abs err": fmt_error(r.max_abs_error) or "—", rel: fmt_error(r.max_rel_error) or "—",
                 "reference": r.reference or "—", "taylor slope": "" if "taylor slope" in dropped else fmt_taylor(r)}
        table.add_row(*(cells[c] for c, _ in cols))
    return table


def render_details(r: CheckResult) -> Group:
    """What went wrong in one check: message, the worst elements, the methods, the user's traceback."""
    parts = []
    head = Text("\n")
    head.append(f"{STATUS_LABEL.get(r.status, r.status)} ", style=STATUS_STYLE.get(r.status, ""))
    head.append(r.name, style="bold")
    head.append(f" ({where(r)}, {r.kind}{', ' + r.mode if r.mode else ''})")
    if r.message:
        head.append(f"\n{r.message}")
    parts.append(head)
    if r.mismatches:
        head_row, rows = _mismatch_rows(r)
        if _shown_title(r):  # prose: a pipe keeps it on one line, as it does the message
            parts.append(Text(_shown_title(r), style="italic"))
        table = Table(heading_columns=2)  # as blocks, each headed by input and index
        for col in head_row:
            table.add_column(col, justify="left" if col in ("input", "index", "output", "direction") else "right")
        for row in rows:
            table.add_row(*row[:-3], Text(row[-3], style="red"), *row[-2:])
        parts.append(table)
    if r.kernel:
        parts.append(kernel_table(r))
    methods = _methods_text(r)
    if methods:
        parts.append(methods)
    for t in (r.taylor, r.taylor2):
        if t is not None:
            parts.append(Text(f"taylor (order {t.order}): {t.verdict}: {t.detail}"))
    if r.digits:
        parts.append(Text(precision_line(r)))
    if r.notes:
        notes = Text()
        for n in r.notes:
            notes.append(f"note: {n}\n", style="dim")
        notes.rstrip()
        parts.append(notes)
    if r.traceback:
        parts.append(Text(r.traceback.rstrip("\n"), style="red"))
    return Group(*parts)


def _shown(r: CheckResult) -> tuple:
    """The entries the details show: the ``MAX_SHOWN`` furthest past their tolerance (the runner keeps
    them worst first), and the one with the largest relative error (the summary's) where it is another;
    -> (entries, whether that one was added)."""
    shown = r.mismatches[:MAX_SHOWN]
    rels = [m for m in r.mismatches if not (isinstance(m.rel_error, float) and math.isnan(m.rel_error))]
    largest = max(rels, key=lambda m: m.rel_error, default=None)
    if largest is None or largest in shown or not largest.rel_error > max(m.rel_error for m in shown):
        return shown, False
    return shown + [largest], True


def _mismatch_rows(r: CheckResult):
    """The entries shown as text: (header, rows), the output and direction columns where they apply."""
    shown, _ = _shown(r)
    jac = any(m.output_index is not None for m in shown)
    along = any(getattr(m, "direction", None) is not None for m in shown)
    head = (["input", "index"] + (["output"] if jac else []) + (["direction"] if along else [])
            + ["expected", "got", "abs err", "rel err"])
    rows = [[m.input, fmt_index(m.index)] + ([fmt_index(m.output_index)] if jac else [])
            + ([str(m.direction) if m.direction is not None else ""] if along else [])
            + [_value(m.expected), _value(m.got), _error(m.abs_error), _error(m.rel_error)] for m in shown]
    return head, rows


def _shown_title(r: CheckResult):
    """Above the entries, when they are not all that are wrong: which they are, of how many."""
    shown, added = _shown(r)
    count = _COUNT.search(r.message)
    wrong = int(count[1]) if count else len(r.mismatches)
    first = min(len(r.mismatches), MAX_SHOWN)
    if wrong <= first and not added:
        return None
    text = f"the {first} entries furthest past their tolerance, of {wrong} wrong"
    return text + (", and the one with the largest relative error" if added else "")


def precision_line(r: CheckResult) -> str:
    """Correct digits of the gradient under test by input, for a check below float64."""
    parts = ", ".join(f"{k} {v:.1f}" for k, v in r.digits.items())
    lost = [f"{k} {100 * v:.3g}%" for k, v in (r.underflow or {}).items() if v > 0]
    return (f"{r.dtype}: correct digits by input (against the float64 reference): {parts}"
            + (f"; entries underflowing to 0: {', '.join(lost)}" if lost else ""))


def _methods_text(r: CheckResult) -> Text | None:
    bad = [(k, m) for k, m in r.methods.items() if m.status not in ("ok", "used")]
    if not bad or r.status == "pass":
        return None
    t = Text()
    for k, m in bad:
        t.append(f"{k}: ", style="bold")
        t.append(m.status)
        if m.max_rel_error is not None:
            t.append(f", max rel err {fmt_error(m.max_rel_error)}")
        if m.message:
            t.append(f" ({m.message})")
        t.append("\n")
    t.rstrip()
    return t


def _value(v) -> str:
    """A worst element's number; a NaN the gradient under test returned is shown, not blanked."""
    return "nan" if isinstance(v, float) and math.isnan(v) else fmt_number(v)


def _error(e) -> str:
    return "nan" if isinstance(e, float) and math.isnan(e) else fmt_error(e) or "—"


def fmt_index(index) -> str:
    if index is None:
        return ""
    index = tuple(index)
    return "[" + ", ".join(str(i) for i in index) + "]" if index else "()"


def summary_counts(report: CheckReport) -> str:
    counts = {}
    for r in report.checks:
        counts[r.status] = counts.get(r.status, 0) + 1
    words = [f"{counts[s]} {w}" for s, w in SUMMARY_WORDS if counts.get(s)]
    if report.errors:
        n = len(report.errors)
        words.append(f"{n} file error{'s' if n > 1 else ''}")
    return ", ".join(words) or "no checks"


def summary_line(report: CheckReport, seconds: float | None = None) -> Text:
    code = report.exit_code
    style = "bold green" if code == 0 else "bold yellow" if code in (3, 130) else "bold red"
    text = summary_counts(report) + (f" in {seconds:.2f} s" if seconds is not None else "")
    if report.interrupted:
        text += "; interrupted " + stopped_text(report, "after")
    return Text("\n" + text, style=style)


def stopped_text(report: CheckReport, ran: str) -> str:
    """What is known of a stopped run: ``ran`` (``"after"``: '... after 1 of 3 checks', else the verb:
    '1 of 3 checks ran') among the checks registered when it stopped, and the model files never reached,
    whose checks no count includes."""
    done, planned = len(report.checks), report.planned if report.planned is not None else len(report.checks)
    if report.unreached is None and not done:
        return "before any model file was checked" if ran == "after" else "no model file was checked"
    unreached = report.unreached or 0
    of = f"{planned} checks" if not unreached else f"the {planned} checks registered so far"
    counted = f"after {done} of {of}" if ran == "after" else f"{done} of {of} {ran}"
    if unreached:
        counted += f"; {unreached} model file{'s' if unreached != 1 else ''} not reached"
    return counted


#: The count the comparisons' messages give (gradcli.checks.comparisons.findings.count_text, forward mode's own).
_COUNT = re.compile(r"\b(\d+) of (\d+) entries\b")
#: A headline longer than this keeps fewer of the message's clauses.
HEADLINE = 100


def headline(r: CheckResult) -> str:
    """What is wrong, in one line (pytest's short summary shows only the first): the inputs with wrong
    entries, how many, the largest relative error (``x: 36 of 336 entries wrong, max rel err 1.0e+01``);
    without compared entries, the message's leading clauses (``torch's backward is not deterministic``)."""
    if r.mismatches:
        inputs = ", ".join(dict.fromkeys(m.input for m in r.mismatches))
        count = _COUNT.search(r.message)
        if count and "," not in inputs:  # one input wrong: its own count, where the message breaks it down
            count = re.search(rf"\b{re.escape(inputs)}: (\d+) of (\d+)\b", r.message) or count
        text = f"{inputs}: {count[1]} of {count[2]} entries wrong" if count else f"{inputs}: wrong"
        return text + (f", max rel err {fmt_error(r.max_rel_error)}" if fmt_error(r.max_rel_error) else "")
    parts = re.split(r"(: |; )", r.message or STATUS_LABEL.get(r.status, r.status))
    text = parts[0]
    for sep, part in zip(parts[1::2], parts[2::2]):
        if len(text) + len(sep) + len(part) > HEADLINE:
            break
        text += sep + part
    return text if len(text) <= HEADLINE else text[:text.rfind(" ", 0, HEADLINE)] + " …"


def result_text(r: CheckResult) -> str:
    """A check's details as plain text, as the table shows them (:func:`render_details`) under a
    :func:`headline`: the status, name and place, the message, the worst elements, the methods that
    disagree, the Taylor tests, the notes and the user's traceback. JUnit, the pytest plugin and
    ``assert_gradients`` all show this."""
    lines = [headline(r), f"{STATUS_LABEL.get(r.status, r.status)} {r.name} ({where(r)}, {r.kind}"
                          f"{', ' + r.mode if r.mode else ''})"]
    if r.message:
        lines.append(r.message)
    if r.mismatches:
        head_row, rows = _mismatch_rows(r)
        if _shown_title(r):
            lines.append(_shown_title(r))
        rows = [[c.replace(" err", " error") for c in head_row]] + rows
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    methods = _methods_text(r)
    if methods:
        lines.append(methods.plain)
    for t in (r.taylor, r.taylor2):
        if t is not None:
            lines.append(f"taylor (order {t.order}): {t.verdict}: {t.detail}")
    if r.digits:
        lines.append(precision_line(r))
    lines.extend(f"note: {n}" for n in r.notes)
    if r.traceback:
        lines.append(r.traceback.rstrip("\n"))
    return "\n".join(lines)
