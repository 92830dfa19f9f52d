"""Every report at 60, 80, 120 and 200 columns (COLUMNS, through click): no line wider than a terminal,
tables within COLUMNS when piped and prose lines left whole, every method and every number the JSON
reports shown in full, and nothing dropped by a narrower layout."""
import collections
import functools
import io
import os
import re

import pytest

from cli_helpers import EXAMPLES, PLAIN_ENV, RUNNER, strict_json
from gradcli.cli import main
from gradcli.render import screen
from gradcli.render.check import MAX_SHOWN
from gradcli.render.screen import Fit, Screen, Table, Text, cell_len

WIDTHS = (60, 80, 120, 200)
BOX = set("┏┳┓┃┡━╇┩│└─┴┘")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?%?")
ROOT = os.path.dirname(os.path.abspath(EXAMPLES))

#: name: (arguments, exit code). Check files are given relative to the repository, as a user would.
CASES = {
    "grad": (["grad", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3"], 0),
    "grad-one-variable": (["grad", "sin(x)", "--at", "x=1.5"], 0),
    "grad-three-variables": (["grad", "x*y*exp(z)", "--at", "x=1.5, y=-2, z=0.3"], 0),
    "grad-vector": (["grad", "x*y, x+y", "--at", "x=1, y=2", "--full", "--direction", "1,1"], 0),
    "grad-batch": (["grad", "x**2*sin(y)", "--batch", "2000", "--domain", "x=-1:1, y=0:2"], 0),
    "check-pass": (["check", os.path.join("examples", "mlp.py")], 0),
    "check-fail": (["check", os.path.join("examples", "bugs", "missing_transpose.py")], 1),
    "hessian": (["hessian", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3", "--full", "--direction", "1,1"], 0),
}


def _invoke(args, env):
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        return RUNNER.invoke(main, args, env={**PLAIN_ENV, "NO_COLOR": "1", **env}, catch_exceptions=False)
    finally:
        os.chdir(old)


@functools.lru_cache(maxsize=None)
def run(case: str, width: int, terminal: bool = False) -> str:
    """The command's stdout at ``width`` columns: piped, or as a terminal prints it."""
    args, code = CASES[case]
    with pytest.MonkeyPatch.context() as mp:
        if terminal:
            mp.setattr(screen, "_isatty", lambda file: True)
        result = _invoke(args, {"COLUMNS": str(width)})
    assert result.exit_code == code, result.output
    return result.stdout


@functools.lru_cache(maxsize=None)
def document(case: str) -> dict:
    args, code = CASES[case]
    result = _invoke(args + ["--json"], {})
    assert result.exit_code == code, result.output
    return strict_json(result.stdout)


def _value(v) -> str:
    """A value as the tables print it: 11 significant digits."""
    return f"{v:.11g}"


def _error(e):
    """An error as the tables print it: two significant digits, 0 as 0; None where nothing is shown."""
    if e is None:
        return None
    return "0" if e == 0 else "inf" if e == float("inf") else f"{e:.1e}"


def _flat(v) -> list:
    return [x for row in v for x in _flat(row)] if isinstance(v, list) else [v]


def _point_entries(doc, names, numbers):
    vector = isinstance(doc["value"], list)
    for i, row in enumerate(doc["symbolic"] if vector else [doc["symbolic"]]):
        names += [f"∂f{i + 1}/∂{v}" if vector else f"∂f/∂{v}" for v in row]
    for name, m in doc["methods"].items():
        own = name != doc["reference"]
        values = list(m["gradient"].values()) if "gradient" in m else _flat(m["jacobian"])
        errors = list(m["rel_error"].values()) if "gradient" in m else _flat(m["rel_error"])
        numbers += [_value(v) for v in values] + ([_error(e) for e in errors] if own else [])
        if "directional_derivative" in m:
            numbers += [_value(v) for v in _flat(m["directional_derivative"])]
            numbers.append(_error(m["directional_rel_error"]) if own else None)


def _hessian_entries(doc, names, numbers):
    v = doc["variables"]
    names += [f"∂²f/∂{a}²" if a == b else f"∂²f/∂{a}∂{b}" for a in v for b in v]
    numbers += [_value(g) for g in doc["gradient"].values()] + [f"{e:.8g}" for e in doc["eigenvalues"]]
    for name, m in doc["methods"].items():
        numbers += [_value(x) for x in _flat(m["hessian"])] + [_error(doc["symmetry"][name])]
        numbers += [_value(m["directional_derivative"])] + [_value(x) for x in m["hvp"] or []]
        if name != doc["reference"]:
            numbers += [_error(e) for e in _flat(m["rel_error"])]
            numbers += [_error(m[k]) for k in ("max_rel_error", "directional_rel_error", "hvp_rel_error")]


def _batch_entries(doc, names, numbers):
    for m in doc["methods"].values():
        numbers.append(str(m["undefined"]))
        if not m.get("reference") and m["agree_fraction"] is not None:
            numbers += [_error(m["max_rel_error"]), _error(m["median_rel_error"]), f"{100 * m['agree_fraction']:.4g}%"]
    for w in doc["worst"]:
        ratio = w["abs_error"] / w["tolerance"]
        numbers += [_value(w["got"]), _value(w["ref"]), _error(w["rel_error"]), f"{ratio:.2g}"]
        names += [f"{k}={v!r}" for k, v in w["point"].items()] + [w["entry"]]


def _check_entries(doc, names, numbers, narrow=False):
    """A narrow screen's summary keeps one line per check: its name and relative error; the place and
    kind of a failure are in its details (tests/checks/test_check_summary.py)."""
    for c in doc["checks"]:
        names.append(c["name"])
        numbers.append(_error(c["max_rel_error"]))
        if not narrow:
            names += [c["reference"] or "—", c["kind"], f"{c['file']}:{c['line']}"]
            numbers.append(_error(c["max_abs_error"]))
        elif c["status"] != "pass":
            names += [c["kind"], f"{c['file']}:{c['line']}"]
        if c["status"] != "pass":
            names += [k for k, m in c["methods"].items() if m["status"] not in ("ok", "used")]
        for mm in c["mismatches"][:MAX_SHOWN]:
            numbers += [_value(mm["expected"]), _value(mm["got"]), _error(mm["abs_error"]), _error(mm["rel_error"])]


def expected(case: str, width: int = max(WIDTHS)):
    """The method names, labels and numbers (as printed) that the JSON of ``case`` reports and its
    report shows at ``width``; the batch's timings are left out (they differ from run to run)."""
    doc = document(case)
    names, numbers = [], []
    if case.startswith("check"):
        _check_entries(doc, names, numbers, narrow=width < 120)
    else:
        names += list(doc["methods"])
        {"grad-batch": _batch_entries, "hessian": _hessian_entries}.get(case, _point_entries)(doc, names, numbers)
    return names, [n for n in numbers if n is not None]


def whole(token: str, text: str) -> bool:
    """``token`` appears in ``text`` not as part of a longer word or number."""
    return re.search(rf"(?<![\w.+\-]){re.escape(token)}(?![\w.])", text) is not None


def skeleton(line: str) -> str:
    return NUMBER.sub("#", line)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES)
def test_every_line_fits_a_terminal(case, width):
    out = run(case, width, terminal=True)
    assert "\x1b" not in out and "…" not in out
    too_long = [line for line in out.splitlines() if cell_len(line) > width]
    assert not too_long, "\n".join(too_long)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES)
def test_piped_tables_fit_columns_and_prose_is_not_wrapped(case, width):
    out, widest = run(case, width).splitlines(), run(case, 200).splitlines()
    widest_prose = {skeleton(line) for line in widest if not BOX & set(line)}
    for line in out:
        if cell_len(line) > width:  # only a prose line, as it is at 200 columns
            assert not BOX & set(line) and skeleton(line) in widest_prose, line
    # a prose line too long for the narrowest screen is one line at every width
    ours = {skeleton(line) for line in out}
    for line in widest:
        if not BOX & set(line) and cell_len(line.strip()) > WIDTHS[0]:
            assert skeleton(line) in ours, line


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES)
def test_every_method_and_number_the_json_reports_is_shown_whole(case, width):
    names, numbers = expected(case, width)
    assert names and numbers
    for out in (run(case, width), run(case, width, terminal=True)):
        assert "…" not in out
        missing = [t for t in names + numbers if not whole(t, out)]
        assert not missing, f"{missing} not in\n{out}"


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("check")])
def test_no_layout_drops_anything(case, monkeypatch):
    """The same report laid out at each width holds the same numbers, as often, and every name (the
    check summary drops columns instead: tests/checks/test_check_summary.py)."""
    shown = []
    original = Screen.print
    monkeypatch.setattr(Screen, "print", lambda self, *r: (shown.extend(r), original(self, *r)))
    run.__wrapped__(case, 200)
    assert shown

    def tokens(width, wrap):
        text = Screen(io.StringIO(), width=width, color=False, wrap=wrap).render(*shown)
        return collections.Counter(NUMBER.findall(text)), text

    reference, _ = tokens(200, False)
    names, _ = expected(case)
    for width in WIDTHS:
        for wrap in (False, True):
            numbers, text = tokens(width, wrap)
            assert numbers == reference, (width, wrap)
            assert [n for n in names if not whole(n, text)] == []


def test_layouts_switch_with_the_width():
    """The grad table: methods as columns at 120, methods as rows at 80, one block per entry at 60."""
    at = {w: run("grad", w) for w in (60, 80, 120)}
    header = {w: next((line for line in at[w].splitlines() if line.startswith("┃")), None) for w in at}
    assert "complex_step" in header[120] and "∂f/∂y" not in header[120]
    assert "∂f/∂x" in header[80] and "∂f/∂y" in header[80] and "complex_step" not in header[80]
    assert header[60] is None
    block = at[60].splitlines()
    start = block.index("∂f/∂y")
    forward = next(line for line in block[start:] if line.split()[:1] == ["forward"])
    assert forward.split()[1:] == [f"{document('grad')['methods']['forward']['gradient']['y']:.11g}",
                                   f"{document('grad')['methods']['forward']['rel_error']['y']:.1e}"]
    # one variable fits as methods-as-rows even at 60
    assert "┃ method" in run("grad-one-variable", 60)


def test_check_table_keeps_one_line_per_check():
    for width in WIDTHS:
        rows = [line for line in run("check-fail", width).splitlines() if "linear" in line and "│" in line]
        assert len(rows) == 1 and "1.0e+01" in rows[0], width
    assert "examples/bugs/missing_transpose.py:9" in run("check-fail", 120).splitlines()[3]


def test_piped_prose_is_one_line_a_terminal_wraps_it():
    message = document("check-fail")["checks"][0]["message"]
    assert len(message) > 120
    assert message in run("check-fail", 60).splitlines()
    wrapped = run("check-fail", 60, terminal=True)
    assert message not in wrapped and " ".join(message.split()) in " ".join(wrapped.split())


def test_piped_width_is_120_without_columns():
    env = {"COLUMNS": None}
    args, _ = CASES["grad-three-variables"]
    out = _invoke(args, env).stdout
    lines = out.splitlines()
    assert any(line.startswith("┏") for line in lines)
    assert max(cell_len(line) for line in lines if BOX & set(line)) <= 120


def _table(values, labels=("a", "b")):
    t = Table()
    t.add_column("")
    for k in range(len(values[0])):
        t.add_column(f"c{k}", justify="right")
    for label, row in zip(labels, values):
        t.add_row(label, *row)
    return t


def plain(renderable, width, wrap=False):
    return Screen(io.StringIO(), width=width, color=False, wrap=wrap).render(renderable)


def test_fit_takes_the_first_layout_that_fits_else_the_last():
    wide, narrow = _table([["1" * 30, "2" * 30]]), _table([["1" * 30]])
    assert wide.width() > 50 > narrow.width()
    assert plain(Fit(wide, narrow, wide), 200) == plain(wide, 200)
    assert plain(Fit(wide, narrow, wide), 50) == plain(narrow, 50)
    assert plain(Fit(wide, narrow, wide), 20) == plain(wide, 20)
    assert not plain(wide, 20).startswith("┏")


def test_blocks_share_one_right_edge_and_wrap_a_long_value_at_spaces():
    t = _table([["1.5", "-0.000123"], ["22", "7"]])
    lines = plain(t, 16).splitlines()
    assert lines == ["a", "  c0        1.5", "  c1  -0.000123", "b", "  c0         22", "  c1          7"]
    long = Table()
    long.add_column("")
    long.add_column("point")
    long.add_row("m", ", ".join(f"x{k}=0.123456789012" for k in range(6)))
    out = plain(long, 40).splitlines()
    assert max(cell_len(line) for line in out) <= 40
    assert " ".join(" ".join(out[1:]).split()) == "point " + ", ".join(f"x{k}=0.123456789012" for k in range(6))
    # a word too long to stand beside its label goes on a line of its own, whole
    path = Table()
    path.add_column("")
    path.add_column("where")
    path.add_row("FAIL", "examples/bugs/missing_transpose.py:9")
    assert plain(path, 40).splitlines() == ["FAIL", "  where", "    examples/bugs/missing_transpose.py:9"]


def test_blocks_are_headed_by_the_heading_columns():
    t = Table(heading_columns=2)
    for name in ("status", "check", "err"):
        t.add_column(name)
    t.add_row(Text("FAIL"), "linear", "1.6e+00")
    assert plain(t, 20).splitlines() == ["FAIL linear", "  err  1.6e+00"]
