"""What a terminal shows: styled text, tables, rules and trees, and the screen that prints them.

gradcli's reports need little of a terminal toolkit: lines of styled text, boxed tables, a heading
rule and an indented tree. Written here in a few hundred lines, they start in a millisecond where
rich's console takes tens (start-up is most of a point command's time), and they obey the one
layout rule the reports need: nothing is ever cropped. A report offers narrower layouts of a table
(:class:`Fit` takes the first that fits); a table wider than the screen is shown with one block per
row instead (its columns as ``header  value`` lines, wrapped at spaces where even those are too
long), and prose is not hard-wrapped when the output is not a terminal, so a CI log never splits a
number.

Every renderable has ``lines(width, wrap) -> list[Line]``: laid out for a screen ``width`` columns
wide, prose word-wrapped to it when ``wrap``. A Line is a list of ``(text, style)`` spans.
A style is a space-separated set of words (``"bold red"``), printed as ANSI codes only when the
screen has colour.
"""
from __future__ import annotations

import os
import sys
import unicodedata

#: Piped output's width when COLUMNS does not say: wide enough for the grad table's six methods.
PIPE_WIDTH = 120

_SGR = {"bold": "1", "dim": "2", "italic": "3", "underline": "4", "reverse": "7",
        "black": "30", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "white": "37"}


def cell_len(text: str) -> int:
    """Terminal columns a text takes: wide East Asian characters take two, combining marks none, a lone
    surrogate the six of the escape it is printed as (``\\udcff``, see Screen.print)."""
    if text.isascii():
        return len(text)
    return sum(6 if "\ud800" <= c <= "\udfff" else 0 if unicodedata.combining(c)
               else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def join_styles(*styles) -> str:
    words: list = []
    for s in styles:
        words.extend(w for w in (s or "").split() if w not in words)
    return " ".join(words)


def line_len(line) -> int:
    return sum(cell_len(t) for t, _ in line)


class Text:
    """Styled text: spans of (text, style), with newlines making several lines."""

    def __init__(self, text: str = "", style: str = ""):
        self.style = style  # the base style, under every span's own
        self.spans: list = [(text, "")] if text else []

    def append(self, text: str, style: str = "") -> "Text":
        if text:
            self.spans.append((text, style or ""))
        return self

    def rstrip(self) -> "Text":
        """Drop trailing whitespace (in place, as the text is built)."""
        while self.spans:
            text, style = self.spans[-1]
            text = text.rstrip()
            if text:
                self.spans[-1] = (text, style)
                break
            self.spans.pop()
        return self

    @property
    def plain(self) -> str:
        return "".join(t for t, _ in self.spans)

    def __len__(self) -> int:
        return len(self.plain)

    def __str__(self) -> str:
        return self.plain

    def split(self) -> list:
        """The lines, unwrapped: a trailing newline leaves an empty last line."""
        lines: list = [[]]
        for text, style in self.spans:
            style = join_styles(self.style, style)
            for i, part in enumerate(text.split("\n")):
                if i:
                    lines.append([])
                if part:
                    lines[-1].append((part, style))
        return lines

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        return [piece for line in self.split() for piece in (wrap(line, width) if wrap_prose else [line])]


def as_text(cell) -> Text:
    return cell if isinstance(cell, Text) else Text("" if cell is None else str(cell))


def wrap(line, width: int) -> list:
    """A line word-wrapped to ``width`` columns (a word longer than the width stays whole); the spaces
    at a break are dropped."""
    width = max(width, 1)
    if line_len(line) <= width:
        return [line]
    chars = [(c, style) for text, style in line for c in text]
    out, start = [], 0
    while start < len(chars):
        used, end, last_space = 0, start, None
        while end < len(chars) and used + cell_len(chars[end][0]) <= width:
            if chars[end][0] == " ":
                last_space = end
            used += cell_len(chars[end][0])
            end += 1
        if end < len(chars) and chars[end][0] != " ":
            if last_space is not None and last_space > start:
                end = last_space
            else:  # a word wider than the line: whole, on a line of its own
                while end < len(chars) and chars[end][0] != " ":
                    end += 1
        out.append(_rstrip(_spans(chars[start:end])))
        start = end
        while start < len(chars) and chars[start][0] == " ":
            start += 1
    return out


def _rstrip(line) -> list:
    text = "".join(t for t, _ in line)
    cut = len(text) - len(text.rstrip())
    while cut and line:
        t, style = line[-1]
        if len(t) <= cut:
            cut -= len(t)
            line = line[:-1]
        else:
            line = line[:-1] + [(t[:len(t) - cut], style)]
            cut = 0
    return line


def _spans(chars) -> list:
    spans: list = []
    for c, style in chars:
        if spans and spans[-1][1] == style:
            spans[-1] = (spans[-1][0] + c, style)
        else:
            spans.append((c, style))
    return spans


class Group:
    """Renderables one after another."""

    def __init__(self, *parts):
        self.parts = parts

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        return [line for part in self.parts for line in part.lines(width, wrap_prose)]


class Rule:
    """A heading: the title, then a line of ``─`` to the screen's width."""

    def __init__(self, title, style: str = "dim"):
        self.title, self.style = as_text(title), style

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        head = self.title.split()[0]
        rest = width - line_len(head) - 1
        if rest <= 0:  # a title as wide as the screen is the heading alone, as prose
            return wrap(head, width) if wrap_prose else [head]
        return [head + [(" ", ""), ("─" * rest, self.style)]]


class Tree:
    """A label with indented children under ``├──``/``└──`` guides."""

    def __init__(self, label, guide_style: str = "dim"):
        self.label, self.guide_style, self.children = as_text(label), guide_style, []

    def add(self, label) -> "Tree":
        child = Tree(label, self.guide_style)
        self.children.append(child)
        return child

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        out = list(self.label.split())
        # (node, the guides before it): an explicit stack, so a deep graph cannot overflow recursion
        stack = [(c, [], i == len(self.children) - 1) for i, c in reversed(list(enumerate(self.children)))]
        while stack:
            node, prefix, last = stack.pop()
            for j, line in enumerate(node.label.split()):
                guide = ("└── " if last else "├── ") if j == 0 else ("    " if last else "│   ")
                out.append([(p, self.guide_style) for p in prefix] + [(guide, self.guide_style)] + line)
            below = prefix + ["    " if last else "│   "]
            n = len(node.children)
            stack.extend((c, below, i == n - 1) for i, c in reversed(list(enumerate(node.children))))
        return out


class Column:
    def __init__(self, header, justify: str, min_width: int):
        self.header, self.justify, self.min_width = as_text(header), justify, min_width


class Table:
    """A boxed table (a heavy header rule, light body), every cell padded one space either side (the
    edge cells too: ``│ ∂f/∂x │``), except on a screen those two outer spaces would overflow: they are
    given up before the boxed layout is; cells may hold several lines. Wider than the screen, it becomes
    one block per row, headed by its first ``heading_columns`` cells."""

    def __init__(self, title=None, title_justify: str = "center", header_style: str = "bold",
                 heading_columns: int = 1):
        self.title = None if title is None else as_text(title)
        self.title_justify, self.header_style = title_justify, header_style
        self.heading_columns = heading_columns
        self.columns: list = []
        self.rows: list = []

    def add_column(self, header="", justify: str = "left", min_width: int | None = None) -> None:
        self.columns.append(Column(header, justify, min_width or 0))

    def add_row(self, *cells) -> None:
        self.rows.append([as_text(c).split() for c in cells] + [[[]]] * (len(self.columns) - len(cells)))

    def _widths(self) -> list:
        return [max([col.min_width, line_len(col.header.split()[0])]
                    + [line_len(line) for row in self.rows for line in row[i]])
                for i, col in enumerate(self.columns)]

    def _pads(self, edges: bool) -> list:
        n = len(self.columns)
        return [(1 if edges or i > 0 else 0, 1 if edges or i < n - 1 else 0) for i in range(n)]

    def _width(self, edges: bool) -> int:
        return sum(self._widths()) + sum(a + b for a, b in self._pads(edges)) + len(self.columns) + 1

    def width(self) -> int:
        """The fewest columns the boxed table takes (its title aside): without the edge cells' outer
        spaces, which a screen one or two columns too narrow does without."""
        return self._width(edges=False)

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        edges = self._width(edges=True) <= width
        widths, pads = self._widths(), self._pads(edges)
        total = self._width(edges)
        if total > width and len(widths) > 1:
            return self._blocks(width)
        out = []
        if self.title is not None:
            for line in _title_lines(self.title, width):
                room = max(0, total - line_len(line))
                left = room // 2 if self.title_justify == "center" else 0
                out.append([(" " * left, "")] + [(t, join_styles("italic", s)) for t, s in line])

        def rule(left, fill, mid, right):
            return [(left + mid.join(fill * (w + a + b) for w, (a, b) in zip(widths, pads)) + right, "")]

        def row_lines(cells, style="", justify=None):
            height = max(len(c) for c in cells)
            for k in range(height):
                line, sep = [], "┃" if style else "│"
                line.append((sep, ""))
                for i, cell in enumerate(cells):
                    content = cell[k] if k < len(cell) else []
                    room = widths[i] - line_len(content)
                    right = (justify or self.columns[i].justify) == "right"
                    a, b = pads[i]
                    line.append((" " * (a + (room if right else 0)), ""))
                    line.extend((t, join_styles(style, s)) for t, s in content)
                    line.append((" " * (b + (0 if right else room)), ""))
                    line.append((sep, ""))
                out.append(line)

        out.append(rule("┏", "━", "┳", "┓"))
        row_lines([[col.header.split()[0]] for col in self.columns], style=self.header_style)
        out.append(rule("┡", "━", "╇", "┩"))
        for row in self.rows:
            row_lines(row)
        out.append(rule("└", "─", "┴", "┘"))
        return out

    def _blocks(self, width: int) -> list:
        """One block per row: its heading cells, then ``header  value`` for each other column (a
        cell's lines side by side), so that a narrow screen still shows every number whole."""
        out = _title_lines(self.title, width) if self.title is not None else []
        k = min(max(1, self.heading_columns), len(self.columns) - 1)
        headers = [col.header.split()[0] for col in self.columns]
        label_width = max(line_len(h) for h in headers[k:])
        # the j-th lines of the right-justified cells share one right edge, so that a block's numbers
        # line up whichever column they come from; a left-justified cell pads to its own column
        depth = max((len(cell) for row in self.rows for cell in row), default=1)
        right = [col.justify == "right" for col in self.columns]
        widths = [[max([line_len(row[i][j]) for row in self.rows if j < len(row[i])], default=0)
                   for j in range(depth)] for i in range(len(self.columns))]
        shared = [max([widths[i][j] for i in range(k, len(widths)) if right[i]], default=0) for j in range(depth)]
        for row in self.rows:
            heading = [span for cell in row[:k] for line in cell if line for span in line + [(" ", "")]][:-1]
            out.extend(wrap([(t, join_styles("bold", s)) for t, s in heading], width))
            for i in range(k, len(self.columns)):
                cell, head = row[i], headers[i]
                if not any(cell):
                    continue
                label = [("  ", "")] + head + [(" " * (label_width - line_len(head) + 2), "")]
                line = list(label)
                for j, value in enumerate(cell):
                    room = " " * ((shared[j] if right[i] else widths[i][j]) - line_len(value))
                    line += ([("  ", "")] if j else []) + ([(room, "")] + value if right[i] else value + [(room, "")])
                line = _rstrip(line)
                out.extend([line] if line_len(line) <= width else _wrapped_value(label, cell, width))
        return out


#: Below this many columns beside its label, a block's too-long value goes on lines of its own.
MIN_VALUE_ROOM = 20


def _title_lines(title: Text, width: int) -> list:
    return [piece for line in title.split() for piece in wrap(line, width)]


def _wrapped_value(label, cell, width: int) -> list:
    """A block line too long for the screen: its value wrapped at spaces under the value's start,
    or on lines of its own below the label where the label leaves too little room (or a word of the
    value is too long to stand beside it)."""
    value: list = []
    for j, part in enumerate(line for line in cell if line):
        value += ([("  ", "")] if j else []) + part
    indent = line_len(label)
    pieces = wrap(value, width - indent) if width - indent >= MIN_VALUE_ROOM else None
    if pieces is None or max(line_len(piece) for piece in pieces) > width - indent:
        return [_rstrip(label)] + [[("    ", "")] + piece for piece in wrap(value, width - 4)]
    return [label + pieces[0]] + [[(" " * indent, "")] + piece for piece in pieces[1:]]


class Fit:
    """Layouts of the same content, widest first: the first table that fits the screen, else the last
    choice (a table that does not fit shows itself as blocks)."""

    def __init__(self, *choices):
        self.choices = choices

    def lines(self, width: int, wrap_prose: bool = False) -> list:
        for choice in self.choices[:-1]:
            if choice.width() <= width:
                return choice.lines(width, wrap_prose)
        return self.choices[-1].lines(width, wrap_prose)


class Screen:
    """Where reports are printed: a file, its width, and whether it takes colour.

    A terminal gets its own width and colour (unless NO_COLOR is set); anything else gets COLUMNS or
    ``PIPE_WIDTH`` for tables and rules, prose lines unwrapped, and colour only with FORCE_COLOR."""

    def __init__(self, file=None, width: int | None = None, color: bool | None = None, wrap: bool | None = None):
        self.file = file if file is not None else sys.stdout
        tty = _isatty(self.file)
        if width is None:
            width = _terminal_columns(self.file) if tty else _columns()
        if color is None:
            color = "NO_COLOR" not in os.environ and (
                bool(os.environ.get("FORCE_COLOR")) or (tty and os.environ.get("TERM") != "dumb"))
        self.width, self.color = width, color
        self.wrap = tty if wrap is None else wrap

    def render(self, *renderables) -> str:
        """The text the renderables print as, each line ending in a newline (and never in a space:
        padding that ends a line is noise in a log and in a diff)."""
        return "".join(self._paint(_rstrip(line)) + "\n" for r in renderables
                       for line in (as_text(r) if isinstance(r, str) else r).lines(self.width, self.wrap))

    def print(self, *renderables) -> None:
        # what cannot be encoded (a lone surrogate in a model's exception text) is written escaped, rather
        # than losing the whole report to a UnicodeEncodeError
        encoding = getattr(self.file, "encoding", None) or "utf-8"
        self.file.write(self.render(*renderables).encode(encoding, "backslashreplace").decode(encoding))
        self.file.flush()

    def _paint(self, line) -> str:
        if not self.color:
            return "".join(t for t, _ in line)
        out = []
        for text, style in line:
            codes = [_SGR[w] for w in style.split() if w in _SGR]
            out.append(f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text)
        return "".join(out)


def _isatty(file) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


def _terminal_columns(file) -> int:
    # shutil.get_terminal_size's rule (COLUMNS first, then the terminal), without importing shutil
    if os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) > 0:
        return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(file.fileno()).columns or PIPE_WIDTH
    except (AttributeError, OSError, ValueError):
        return PIPE_WIDTH


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return PIPE_WIDTH
    return columns if columns > 0 else PIPE_WIDTH
