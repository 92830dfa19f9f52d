"""The console sessions of the README and the docs pages, run as the reader would run them.

A fenced block marked ```console holds sessions: a line ``$ gradcli ARGS`` is a command, the lines up to
the next ``$`` line are what it prints (stdout and stderr as a terminal interleaves them). A command may
end in ``; echo $?``: its exit status is then the last line of the output. Commands run through click's
CliRunner in this process, from the repository root, with colour off and no ``COLUMNS``/``LINES`` (the
width of a pipe), so the docs show what ``gradcli ... | cat`` prints.

Expected and actual output are compared after one normalisation, the same on both sides:

- trailing spaces and trailing blank lines are dropped (editors strip them);
- a run's time, ``in 0.12 s``, reads ``in <T> s`` (it changes from run to run);
- the repository's absolute path reads ``.``;
- an expected line that is exactly ``...`` stands for any number of lines (a long report cut short).

Then line by line: the text exactly, and each figure (a number standing alone, not part of a word) by its
kind, because the last digits of some figures depend on the machine's libm and SIMD width (the same
``exp(x)`` differs by an ulp between an AVX2 and an AVX-512 CPU) and not on gradcli:

- a figure written ``-0.99±0.2`` on the page matches any figure within 0.2 of -0.99 (a figure that is
  rounding noise, such as a round-off slope);
- a figure ending in ``…`` on the page, ``0.370737…``, has its further digits elided: it matches a
  figure within one unit of its last shown digit;
- a relative error below ``ROUNDING_LEVEL`` (1e-8), written as the tables write errors (``1.2e-16``),
  matches one within a factor of ``ERROR_FACTOR`` (10), errors under float64's epsilon counting as
  epsilon: how far below one ulp a correctly rounded result lies is luck, and differences divide an
  ulp by their step;
- a figure of ``LONG_DIGITS`` (10) or more significant digits (a value, an estimate) matches one within
  ``LONG_RTOL`` (1e-9) of it: its last digits are rounding;
- a zero matches a zero of either sign (``-0.00``: the sign of something that rounds to zero);
- every other figure (counts, exit codes, indices, steps, the errors of real bugs) exactly.

Where a figure may change length, the spaces around it may too; the rest of the line (a table's
borders, words) is compared exactly.

``python tests/docs_blocks.py --update FILE...`` writes the real output into those files' sessions,
keeping every line that still matches as it is written (so marked figures and other machines' last digits
stay) and every ``...`` over the lines it stands for, and lists the marked lines it had to replace: for
deliberate changes of the output, never to make a test pass without reading the difference.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shlex
import sys

from click.testing import CliRunner

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the environment every session runs in: no colour, the width of a pipe
ENV = {"FORCE_COLOR": None, "NO_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None,
       "COLUMNS": None, "LINES": None}
STATUS_SUFFIX = "; echo $?"
ELLIPSIS = "..."
_FENCE = re.compile(r"^```(\S*)\s*$")
_TIMING = re.compile(r"\bin \d+(?:\.\d+)? s\b")

#: relative errors below this are rounding-level: float64's own (1e-16) and that of differences (1e-12..1e-9)
ROUNDING_LEVEL = 1e-8
#: ... and match within this factor of each other
ERROR_FACTOR = 10.0
#: float64's machine epsilon: an error below it only says how close to a double the exact value lies
EPS = 2.0 ** -52
#: figures with this many significant digits or more match to LONG_RTOL
LONG_DIGITS = 10
LONG_RTOL = 1e-9
#: the marks a page may put on a figure: its further digits elided, or a tolerance
ELIDED = "…"
PLUS_MINUS = "±"

_NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
#: a figure: a number that is not part of a word (v0, f1, float64) nor of a longer number
_FIGURE = re.compile(r"(?<![\w.])(?P<num>" + _NUM + r")(?:(?P<elided>" + ELIDED + r")|" + PLUS_MINUS
                     + r"(?P<tol>\d+(?:\.\d+)?(?:e[-+]?\d+)?))?(?![\w.])")
_ERROR_FIGURE = re.compile(r"\d\.\de[-+]\d\d")  # how the tables write an error: 1.2e-16


@dataclasses.dataclass
class Session:
    path: pathlib.Path
    line: int  # 1-based line of the ``$`` line
    command: str
    expected: list  # the output lines as written
    end: int  # 0-based index one past the last output line

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list:
    """The README and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def fenced_blocks(lines: list):
    """(language, index of the first line inside, index of the closing fence) for every fenced block."""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        yield m.group(1), i + 1, j
        i = j + 1


def sessions(path: pathlib.Path) -> list:
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for lang, start, stop in fenced_blocks(lines):
        if lang != "console":
            continue
        current = None
        for k in range(start, stop):
            if lines[k].startswith("$ "):
                if current is not None:
                    current.end = k
                current = Session(path, k + 1, lines[k][2:].strip(), [], stop)
                found.append(current)
            elif current is None:  # output with no command: a session that fails, saying so
                current = Session(path, k + 1, "", [lines[k]], stop)
                found.append(current)
            else:
                current.expected.append(lines[k])
    return found


def argv(command: str) -> tuple:
    """``gradcli ARGS [; echo $?]`` -> (ARGS, whether the exit status is shown)."""
    shows_status = command.endswith(STATUS_SUFFIX)
    if shows_status:
        command = command[: -len(STATUS_SUFFIX)]
    words = shlex.split(command)
    if not words or words[0] != "gradcli":
        raise ValueError(f"a console session is '$ gradcli ...' and its output, not {command!r} "
                         "(other commands go in ```bash blocks)")
    return words[1:], shows_status


def run(command: str) -> str:
    """What ``command`` prints on a terminal, its exit status last where the command asks for it."""
    from gradcli.cli import main

    args, shows_status = argv(command)
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(main, args, env=ENV, prog_name="gradcli", catch_exceptions=False)
    finally:
        os.chdir(old)
    out = result.output
    if shows_status:
        out = out + ("" if not out or out.endswith("\n") else "\n") + f"{result.exit_code}\n"
    return out


def tidy(lines: list) -> list:
    """Lines as a page holds them: no trailing spaces or blank lines, the repository's path as ``.``."""
    out = [line.rstrip().replace(str(ROOT), ".") for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def normalise(lines: list) -> list:
    return [_TIMING.sub("in <T> s", line) for line in tidy(lines)]


def _same(expected: str, actual: str) -> bool:
    """:func:`line_matches` after the normalisation."""
    return line_matches(*(_TIMING.sub("in <T> s", line.rstrip().replace(str(ROOT), "."))
                          for line in (expected, actual)))


def _significant(text: str) -> int:
    mantissa = text.lstrip("+-").split("e")[0].replace(".", "")
    return len(mantissa.lstrip("0"))


def _unit(text: str) -> float:
    """One unit in the last digit of ``text``: 1e-6 for 0.370737, 1e-17 for 1.2e-16."""
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def _rule(m: re.Match):
    """How the page's figure ``m`` is compared: None for exactly, else a test of the printed figure."""
    text, shown = m.group("num"), float(m.group("num"))
    if m.group("tol") is not None:
        tol = float(m.group("tol"))
        return lambda got: abs(float(got) - shown) <= tol
    if m.group("elided"):
        unit = _unit(text)
        return lambda got: abs(float(got) - shown) <= unit * (1 + 1e-9)
    if _ERROR_FIGURE.fullmatch(text) and shown < ROUNDING_LEVEL:
        def near(got):
            if not _ERROR_FIGURE.fullmatch(got):
                return False
            ratio = max(float(got), EPS) / max(shown, EPS)
            return 1 / ERROR_FACTOR <= ratio <= ERROR_FACTOR
        return near
    if _significant(text) >= LONG_DIGITS and ("." in text or "e" in text):
        return lambda got: abs(float(got) - shown) <= LONG_RTOL * abs(shown)
    if shown == 0:
        return lambda got: float(got) == 0 and got.lstrip("+-") == text.lstrip("+-")
    return None


def _pattern(line: str):
    """(a regex for the printed line, the tests of its figures in order) for one line of the page."""
    parts, tests, pos = [], [], 0
    for m in _FIGURE.finditer(line):
        rule = _rule(m)
        if rule is None:
            continue
        before, after = line[pos:m.start()], line[m.end():]
        # padding the page has stays (one space or more); where it has none, a shorter figure may gain some
        spaces = " +" if before.endswith(" ") and before.strip(" ") else " *"
        parts.append(re.escape(before.rstrip(" ")) + spaces)
        parts.append(r"(?<![\w.])(" + _NUM + r")(?![\w.])")
        tests.append(rule)
        pos = m.end()
        # the spaces after a figure may change with its length too
        gap = len(after) - len(after.lstrip(" "))
        if gap:
            parts.append(" *" if not after.strip(" ") else " +")
            pos += gap
    parts.append(re.escape(line[pos:]))
    return re.compile("".join(parts)), tests


_PATTERNS: dict = {}


def line_matches(expected: str, actual: str) -> bool:
    """Whether the printed line ``actual`` is the page's line ``expected``, figures compared by kind."""
    if expected == actual:
        return True
    if expected not in _PATTERNS:
        _PATTERNS[expected] = _pattern(expected)
    regex, tests = _PATTERNS[expected]
    m = regex.fullmatch(actual)
    return m is not None and all(test(got) for test, got in zip(tests, m.groups()))


def _lines_match(expected: list, actual: list) -> bool:
    """``...`` lines matching any run of lines, every other line by :func:`line_matches`."""
    seen = {}

    def fits(i, j):
        if (i, j) not in seen:
            if i == len(expected):
                seen[i, j] = j == len(actual)
            elif expected[i] == ELLIPSIS:
                seen[i, j] = any(fits(i + 1, k) for k in range(j, len(actual) + 1))
            else:
                seen[i, j] = j < len(actual) and line_matches(expected[i], actual[j]) and fits(i + 1, j + 1)
        return seen[i, j]

    return fits(0, 0)


def matches(expected: list, actual: list) -> bool:
    """Whether ``actual`` (normalised) is ``expected`` (normalised): ``...`` lines match any lines, figures
    match by their kind (the module's docstring)."""
    return _lines_match(normalise(expected), normalise(actual))


def matches_unnormalised(expected: list, actual: list) -> bool:
    """As :func:`matches` without the normalisation: trailing spaces, timings and paths count too."""
    return ELLIPSIS not in expected and _lines_match(expected, actual)


def marked(line: str) -> bool:
    """Whether a line of a page marks a figure (``…`` or ``±``)."""
    return any(m.group("elided") or m.group("tol") for m in _FIGURE.finditer(line))


_PREFERRED = ("keep", "replace", "insert", "drop")


def merge(expected: list, actual: list) -> tuple:
    """The session's new lines: ``actual`` aligned with the page's, keeping each line of the page that
    still matches as it is written (its marks, another machine's last digits) and each ``...`` (over the
    lines it stands for). -> (lines, the indices of the page's marked lines that no longer match)."""
    n, m = len(expected), len(actual)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * (n + m) + 100))
    cost = {}

    def best(i, j):
        """(changed lines, the next step) aligning expected[i:] with actual[j:]."""
        if (i, j) not in cost:
            if i == n:
                cost[i, j] = (m - j, "insert")
            elif expected[i] == ELLIPSIS:  # stands for actual[j:k], any k
                cost[i, j] = min((best(i + 1, k)[0], k) for k in range(j, m + 1))
            else:
                options = [(1 + best(i + 1, j)[0], "drop")]
                if j < m:
                    options.append((1 + best(i, j + 1)[0], "insert"))
                    options.append((1 + best(i + 1, j + 1)[0], "replace"))  # a stale line, in its place
                    if _same(expected[i], actual[j]):
                        options.append((best(i + 1, j + 1)[0], "keep"))
                cost[i, j] = min(options, key=lambda o: (o[0], _PREFERRED.index(o[1])))
        return cost[i, j]

    out, lost, i, j = [], [], 0, 0
    while i < n or j < m:
        _, step = best(i, j)
        if i < n and expected[i] == ELLIPSIS:
            out.append(ELLIPSIS)
            i, j = i + 1, step
        elif step == "keep":
            out.append(expected[i])
            i, j = i + 1, j + 1
        elif step in ("drop", "replace"):
            if marked(expected[i]):
                lost.append(i)
            if step == "replace":
                out.append(actual[j])
                j += 1
            i += 1
        else:
            out.append(actual[j])
            j += 1
    return out, lost


def update(path: pathlib.Path) -> list:
    """Write the real output into ``path``'s sessions (:func:`merge`). -> the marked lines that no longer
    matched and were replaced, as ``FILE:LINE``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    unmarked = []
    for s in reversed(sessions(path)):
        new, lost = merge(s.expected, tidy(run(s.command).splitlines()))
        unmarked += [f"{s.path.relative_to(ROOT)}:{s.line + 1 + k}" for k in reversed(lost)]
        lines[s.line:s.end] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return unmarked[::-1]


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--update":
        sys.exit("usage: python tests/docs_blocks.py --update FILE...")
    for name in sys.argv[2:]:
        for where in update(pathlib.Path(name).resolve()):
            print(f"a marked figure (… or ±) no longer matched and its line was rewritten: {where}")
