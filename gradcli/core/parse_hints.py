"""What the parser suggests: the hints of its error messages (a missing ``*``, a misspelt function, a
module prefix) and, for the CLI, the variables that look like a call without its parentheses
(``sinx``). Words only: none of it changes what an expression means."""
from __future__ import annotations

import re
from typing import Iterable

from gradcli.core.graph import Graph
from gradcli.core.primitives import CONSTANTS, FUNCTION_NAMES

_HINT_WIDTH = 60  # a longer expression is not repeated in a hint


def times_hint(text, tokens, i):
    """For an operand tokens[i] written right after another one: the whole expression with ``*`` put
    between them (``x**2*sin(x)``), so that the suggestion means what was written; a part of it could
    read as a replacement that drops what binds tighter on its left (``2*sin(x)`` for ``x**2 sin(x)``)."""
    before, after = tokens[i - 1], tokens[i]
    whole = text[:before.end] + "*" + text[after.pos:]
    if len(whole) > _HINT_WIDTH:
        return f"insert * between {before.text!r} and {after.text!r}"
    return f"did you mean {whole}?"


def unknown_function_hint(name):
    """The closest known function names, or the list of them where none is close: never ``foo*(x)``,
    since a call and a product are different expressions and the hint must not change which one is meant."""
    import difflib  # only a misspelt name needs it

    close = difflib.get_close_matches(name, FUNCTION_NAMES, n=3, cutoff=0.6)
    if name.lower() in FUNCTION_NAMES and name.lower() not in close:
        close.insert(0, name.lower())  # names are case-sensitive: Sin(x) is almost surely sin(x)
    if not close:
        return "the functions are " + ", ".join(sorted(FUNCTION_NAMES))
    return "did you mean " + (close[0] if len(close) == 1 else ", ".join(close[:-1]) + " or " + close[-1]) + "?"


_DOTTED = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def module_prefix_hint(text, dot):
    """``np.sin(x)``, ``jax.numpy.exp(x)``, ``math.pi``: what to write without the module prefix whose
    first '.' is at ``dot``, or None where no known function or constant ends the dotted name."""
    m = _DOTTED.match(text, dot)
    if m is None:
        return None
    name = m.group().rsplit(".", 1)[1]
    if name in CONSTANTS:
        return f"write {name}: constants are used without a module prefix"
    if name not in FUNCTION_NAMES:
        called = text[m.end():m.end() + 1] == "("  # np.dot(x, x): a function gradcli does not have
        return f"functions are used without a module prefix; {unknown_function_hint(name)}" if called else None
    return f"write {_call_text(text, m.end() - len(name), m.end())}: functions are used without a module prefix"


def _call_text(text, start, end):
    """The text of the call whose name spans text[start:end] (``sin(x**2)``), or ``sin(...)`` where its
    parentheses do not close or it is long."""
    depth = 0
    for j in range(end, min(len(text), start + _HINT_WIDTH)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth <= 0:
            if j > end and text[end] == "(" and depth == 0:
                return text[start:j + 1]
            break
    return text[start:end] + "(...)"


# --- warnings for the CLI ----------------------------------------------------------------------------

def _split_call(name: str):
    """("sin", "x") for "sinx": a function name followed by one or two letters, longest name first.

    Longer tails are left alone: "expected" or "absolute" are more likely meant as names. Short ones
    still catch honest names ("cost"), which is why the CLI only warns, and the contract only where such a
    name is the sole variable.
    """
    for f in sorted(FUNCTION_NAMES, key=len, reverse=True):
        tail = name[len(f):]
        if name.startswith(f) and 1 <= len(tail) <= 2 and tail.isascii() and tail.isalpha():
            return f, tail
    return None


def suspicious_variables(graph_or_names: Graph | Iterable[str]) -> list[str]:
    """Variables that look like a call missing its parentheses (``sinx``, ``expx``), in order."""
    names = graph_or_names.variables if isinstance(graph_or_names, Graph) else graph_or_names
    return [n for n in names if _split_call(n)]


def suggest_call(name: str) -> str | None:
    """``"sin(x)"`` for ``"sinx"``: the call a suspicious variable probably meant, or None."""
    split = _split_call(name)
    return f"{split[0]}({split[1]})" if split else None
