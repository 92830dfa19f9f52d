"""The one exception for input the user must fix (CLI: one line on stderr, exit code 2), and the checks of
the values the command line and the Python API share (a real number, text safe to echo)."""
from __future__ import annotations

import numbers


def printable(text: str) -> str:
    """``text`` safe to echo on one terminal line: whitespace becomes a space, and any other character
    a terminal would act on rather than show (ESC, BEL, NUL, a right-to-left override) its escape,
    ``\\x1b``. Printable characters, non-ASCII ones included, are kept."""
    if text.isprintable():
        return text
    return "".join(shown(c) for c in text)


def shown(c: str) -> str:
    """How :func:`printable` shows the one character ``c``."""
    if c.isprintable():
        return c
    if c.isspace():
        return " "
    return c.encode("unicode_escape").decode("ascii")


class BadInput(ValueError):
    """Bad input: ``message`` is one line; ``detail`` may add the expression with a caret under ``column``.

    The message is made :func:`printable`, so that no input can break that line or reach the terminal
    as a control sequence."""

    def __init__(self, message: str, detail: str = "", column: int | None = None):
        message = printable(str(message))
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.column = column


def real_number(value, name: str) -> float:
    """``value`` as a float, or BadInput naming ``name`` ("rtol", "the value of x"): an int, a float, a
    numpy real scalar or 0-d array. A bool, a str ("1.5"), a complex number, None and an integer beyond
    float64's range (10**400) are refused, not converted."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if isinstance(value, bool) or kind == "b" or not (
            isinstance(value, numbers.Real) or (kind in ("i", "u", "f") and getattr(value, "ndim", None) == 0)):
        raise BadInput(f"{name} must be a real number, got {brief(value)}")
    try:
        return float(value)
    except OverflowError:
        raise BadInput(f"{name} is beyond float64's range (about 1.8e308), got {brief(value)}") from None


def brief(value, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters (10**400 has 401 digits)."""
    text = printable(repr(value))
    return text if len(text) <= limit else f"{text[:limit - 3]}..."
