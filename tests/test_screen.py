"""The terminal layout (gradcli.render.screen): boxed tables, blocks when too wide, colour, wrapping,
trees; and the commands' output at 40 to 200 columns, where no number may be cropped."""
import io
import re
import subprocess
import sys

import pytest

from gradcli.render.screen import Group, Rule, Screen, Table, Text, Tree, cell_len

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(*renderables, width=120, wrap=False) -> str:
    return Screen(io.StringIO(), width=width, color=False, wrap=wrap).render(*renderables)


def small_table(title=None) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("")
    t.add_column("value", justify="right")
    t.add_row("a", "1.5")
    t.add_row(Text("bb"), Text("22\n3e-16"))
    return t


def test_a_table_that_fits_is_boxed():
    assert plain(small_table()) == (
        "┏━━━━┳━━━━━━━┓\n"
        "┃    ┃ value ┃\n"
        "┡━━━━╇━━━━━━━┩\n"
        "│ a  │   1.5 │\n"
        "│ bb │    22 │\n"
        "│    │ 3e-16 │\n"
        "└────┴───────┘\n")


def test_a_lone_surrogate_is_printed_escaped_and_the_box_stays_aligned():
    # a path in a folder whose name is not UTF-8, a model's message with "\ud800": both reach the table
    t = Table()
    t.add_column("file")
    t.add_row("bad\udcff dir/m.py")
    t.add_row("ok.py")
    out = io.StringIO()
    Screen(out, width=120, color=False, wrap=False).print(t)
    lines = out.getvalue().splitlines()
    assert "bad\\udcff dir/m.py" in out.getvalue()
    assert len({len(line) for line in lines}) == 1, lines


def test_a_title_is_not_padded_to_the_table():
    # a left title ends where its text does; a centred one keeps only its left margin
    lines = plain(small_table("along v")).splitlines()
    assert lines[0] == "along v" and lines[1].startswith("┏")
    t = small_table("mid")
    t.title_justify = "center"
    title, box = plain(t).splitlines()[:2]
    assert title.strip() == "mid" and not title.endswith(" ")
    assert abs((len(box) - len(title)) - (len(title) - len("mid"))) <= 1


def test_no_line_ends_in_a_space_even_when_a_cell_does():
    t = Table()
    t.add_column("a")
    t.add_row("x ")
    out = plain(Group(Text("trailing  \n"), t))
    assert out.splitlines() and not any(line.endswith(" ") for line in out.splitlines())


def test_a_table_wider_than_the_screen_becomes_blocks_with_every_value_whole():
    t = Table()
    t.add_column("")
    names = [f"method{k}" for k in range(8)]
    for name in names:
        t.add_column(name, justify="right", min_width=13)
    t.add_row("∂f/∂x", *(Text(f"0.8865606199{k}\n1.2e-1{k}") for k in range(8)))
    out = plain(t, width=60)
    assert max(cell_len(line) for line in out.splitlines()) <= 60
    assert out.splitlines()[0] == "∂f/∂x"
    for k, name in enumerate(names):
        row = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert row.split()[1:] == [f"0.8865606199{k}", f"1.2e-1{k}"]
    # wide enough: the box again
    assert plain(t, width=200).startswith("┏")


def test_colour_is_ansi_only_when_asked():
    text = Text("ok ", style="bold").append("bad", style="bold red")
    coloured = Screen(io.StringIO(), width=80, color=True).render(text)
    assert coloured == "\x1b[1mok \x1b[0m\x1b[1;31mbad\x1b[0m\n"
    assert ANSI.sub("", coloured) == plain(text)


def test_prose_wraps_on_a_terminal_only():
    text = Text("alpha beta gamma delta epsilon")
    assert plain(text, width=12) == "alpha beta gamma delta epsilon\n"
    assert plain(text, width=12, wrap=True) == "alpha beta\ngamma delta\nepsilon\n"
    # a word longer than the line is kept whole
    assert plain(Text("1.23456789012345"), width=5, wrap=True) == "1.23456789012345\n"


def test_a_trailing_newline_is_an_empty_line_and_groups_stack():
    assert plain(Group(Text("a\n"), Text("b"))) == "a\n\nb\n"


def test_rule_and_tree():
    assert plain(Rule(Text("Title", style="bold")), width=12) == "Title ──────\n"
    root = Tree("f")
    a = root.add("v2 = v0 * v1")
    a.add("v0 = x")
    a.add("v1 = y")
    root.add("v3 = 2")
    assert plain(root) == ("f\n"
                           "├── v2 = v0 * v1\n"
                           "│   ├── v0 = x\n"
                           "│   └── v1 = y\n"
                           "└── v3 = 2\n")


def test_cell_width_of_wide_and_combining_characters():
    assert cell_len("∂f/∂x") == 5
    assert cell_len("格子") == 4
    assert cell_len("e\u0301") == 1


def test_text_rstrip_and_plain():
    t = Text("a").append("b  \n", style="red").append("  ")
    assert t.rstrip().plain == "ab"


def _gradcli(args, columns):
    env = {"COLUMNS": str(columns), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("columns", [40, 60, 80, 120, 200])
def test_grad_output_fits_and_shows_every_method_whole(columns):
    r = _gradcli(["grad", "x**2*sin(y)", "--at", "x=1.5", "--at", "y=0.3"], columns)
    assert r.returncode == 0, r.stderr
    table = [line for line in r.stdout.splitlines() if not line.startswith(("f(", "at ", "value", "∂f/∂", "✓"))]
    assert max(cell_len(line) for line in table) <= max(columns, 40)
    for name in ("symbolic", "forward", "reverse", "central", "richardson", "complex_step"):
        assert name in r.stdout
    # the numbers are whole: 11 significant digits of each partial, as at 200 columns (the last one free:
    # central's estimate is 1e-12 from a rounding boundary, and which side it falls depends on the libm)
    assert len(re.findall(r"\b0\.8865606199\d\b", r.stdout)) == 6
    assert len(re.findall(r"\b2\.149507100\d\b", r.stdout)) == 6
    assert "…" not in r.stdout


def test_the_outer_spaces_go_before_the_boxed_layout_does():
    t = small_table()
    padded = plain(t).splitlines()
    assert padded[3] == "│ a  │   1.5 │"
    tight = plain(t, width=len(padded[0]) - 1).splitlines()
    assert tight[3] == "│a  │   1.5│" and len(tight[0]) == len(padded[0]) - 2
    assert t.width() == len(tight[0])  # what a Fit weighs: the table still fits there
    assert plain(t, width=len(tight[0]) - 1).splitlines()[0] == "a"  # narrower still: blocks


BORDERS = "│┃"
PIPED = [
    ["grad", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--direction", "1,0"],
    ["grad", "x*y, x+y", "--at", "x=1, y=2"],
    ["grad", "x*y, x+y", "--at", "x=1, y=2", "--full"],
    ["grad", "x**2*sin(y)", "--batch", "500", "--domain", "x=-1:1, y=0:2"],
    ["hessian", "x**2*sin(y)", "--at", "x=1.5, y=0.3"],
    ["hessian", "x*y*z", "--at", "x=1, y=2, z=3", "--full", "--direction", "x=1"],
    ["plot", "sin(x)", "--x", "-3:3"],
    ["steps", "exp(x)", "--at", "x=1"],
]


@pytest.mark.parametrize("args", PIPED, ids=" ".join)
def test_piped_output_has_no_trailing_space_and_padded_cells(args):
    if args[0] in ("plot", "steps"):
        pytest.importorskip("plotext")  # the plot extra
    # the batch's worst points (17-digit coordinates) need a column more than 120 with the outer spaces:
    # there the table gives up those two spaces rather than its layout (see the test above)
    r = _gradcli(args, 160 if "--batch" in args else 120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and [line for line in lines if line != line.rstrip()] == []
    # a table row (it starts at a border) has a space on each side of every border inside it, and
    # one after the first and before the last border: "│ ∂f/∂x │", never "│∂f/∂x │"
    rows = [line for line in lines if line and line[0] in BORDERS]
    assert rows or args[0] in ("plot", "steps")
    for line in rows:
        assert line[-1] in BORDERS, line
        for i, c in enumerate(line):
            if c in BORDERS:
                assert (i == 0 or line[i - 1] == " ") and (i == len(line) - 1 or line[i + 1] == " "), line
