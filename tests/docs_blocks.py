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

``python tests/docs_blocks.py --update FILE...`` writes the real output into those files' sessions
(sessions with ``...`` are left alone and listed): for deliberate changes of the output, never to make
a test pass without reading the difference.
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


def matches(expected: list, actual: list) -> bool:
    """Whether ``actual`` (normalised) is ``expected`` (normalised), ``...`` lines matching any lines."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if line == ELLIPSIS else re.escape(line) + r"\n"
                      for line in normalise(expected))
    return re.fullmatch(pattern, "".join(line + "\n" for line in normalise(actual))) is not None


def update(path: pathlib.Path) -> list:
    """Write the real output into ``path``'s sessions; -> the sessions left alone (they hold ``...``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    skipped = []
    for s in reversed(sessions(path)):
        if ELLIPSIS in s.expected:
            skipped.append(s.name)
            continue
        lines[s.line:s.end] = tidy(run(s.command).splitlines())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return skipped


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "--update":
        sys.exit("usage: python tests/docs_blocks.py --update FILE...")
    for name in sys.argv[2:]:
        for left in update(pathlib.Path(name).resolve()):
            print(f"left alone (it elides lines with ...): {left}")
