"""Expression text -> Graph, without eval: a hand-written tokenizer and an iterative operator parser.

The parser is a shunting-yard loop with explicit stacks, so no input can exhaust Python's recursion
limit: nesting is bounded by ``max_depth`` (a clean ParseError), not by the interpreter. The grammar
follows Python's precedence (docs/contract.md, the expression language): ``**``/``^`` (right-associative, and binding tighter
than a unary minus on its left but accepting one on its right) > unary ``+ -`` > ``* /`` > ``+ -``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gradcli.core.errors import BadInput, printable, shown
from gradcli.core.graph import Graph, GraphBuilder, GraphError, evaluate
from gradcli.core.parse_hints import module_prefix_hint, times_hint, unknown_function_hint
from gradcli.core.primitives import ALIASES, CONSTANTS, FUNCTION_NAMES, PRIMITIVES

__all__ = ["ParseError", "parse", "parse_constant", "parse_expression"]

_DISPLAY_WIDTH = 100  # longer expressions are shown as a window around the caret


class ParseError(ValueError):
    """An expression that cannot be read; ``column`` is 1-based, ``hint`` a suggested fix or None."""

    def __init__(self, message: str, column: int, text: str, hint: str | None = None):
        # the message and hint quote the text (a number, a span of it): never a control character raw
        message, hint = printable(message), None if hint is None else printable(hint)
        super().__init__(message)
        self.message, self.column, self.text, self.hint = message, column, text, hint

    def __reduce__(self):  # the default would re-create the error from ``message`` alone
        return (type(self), (self.message, self.column, self.text, self.hint))

    def caret(self) -> str:
        """Two lines: the expression (a window around the column if it is long) and a caret under it.

        Whitespace shows as a space and a control character as its escape (``\\x1b``), never raw; the
        caret counts what each source character shows as, so it stays under the column."""
        text, at, prefix, suffix = self.text, self.column - 1, "", ""
        if len(text) > _DISPLAY_WIDTH:
            start = max(0, min(at - _DISPLAY_WIDTH // 2, len(text) - _DISPLAY_WIDTH))
            end = start + _DISPLAY_WIDTH
            prefix, suffix = ("..." if start > 0 else ""), ("..." if end < len(text) else "")
            text, at = text[start:end], at - start
        units = [shown(c) for c in text]
        return prefix + "".join(units) + suffix + "\n" + " " * (len(prefix) + len("".join(units[:at]))) + "^"

    def render(self) -> str:
        """``error: ... at column N``, the text, a caret under the column, then ``hint: ...``."""
        hint = f"\nhint: {self.hint}" if self.hint else ""
        return f"error: {self.message} at column {self.column}\n{self.caret()}{hint}"

    __str__ = render

    def one_line(self) -> str:
        """The message on one line, for logs, JSON and annotations."""
        return f"{self.message} (column {self.column})" + (f"; {self.hint}" if self.hint else "")


# --- tokens -------------------------------------------------------------------------------------------

class _Token(NamedTuple):
    kind: str  # "num", "name", "op", "(", ")", ",", "end", or "bad" (a lexical error, raised when reached)
    text: str  # for "bad": the message
    pos: int  # 0-based start
    end: int  # 0-based end (exclusive)
    value: object = None  # a number's float; for "bad": the hint

    @property
    def col(self) -> int:
        return self.pos + 1


# One alternation: the regex engine skips spaces and finds each token's end, Python only classifies.
_TOKEN = re.compile(r"""(?P<space>\s+)
    | (?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>\*\*|[-+*/^])
    | (?P<punct>[(),])""", re.X)
_CHAR_HINTS = {"[": "use ( ) for grouping", "]": "use ( ) for grouping", "{": "use ( ) for grouping",
               "}": "use ( ) for grouping", "×": "use * to multiply", "·": "use * to multiply",
               "−": "use the ASCII minus -", "÷": "use / to divide", "=": "write only the expression"}


def _tokenize(text: str, limit: int) -> list[_Token]:
    """All tokens, ending with "end". A lexical error, or reaching ``limit`` characters, becomes a final
    "bad" token instead, so that the parser reports errors left to right (50,000 nested parentheses:
    the depth error at column 10,001 comes before the length error)."""
    out, pos, n = [], 0, len(text)
    match, Token = _TOKEN.match, _Token
    while pos < n:
        if pos >= limit:
            return out + [Token("bad", f"expression longer than {limit} characters", limit, limit + 1)]
        m = match(text, pos)
        if m is None:
            c = text[pos]
            hint = _CHAR_HINTS.get(c)
            if c == "." and out and out[-1].kind == "name" and out[-1].end == pos:  # np.sin(x)
                hint = module_prefix_hint(text, pos)
            return out + [Token("bad", f"unexpected character {c!r}", pos, pos + 1, hint)]
        kind, word, end = m.lastgroup, m.group(), m.end()
        if end > limit:
            return out + [Token("bad", f"expression longer than {limit} characters", limit, limit + 1)]
        if kind == "num":
            nxt, after = text[end:end + 1], text[end + 1:end + 2]
            if nxt == ".":  # 1.2.3, 1..2
                bad = re.compile(r"[0-9.]*").match(text, end).end()
                return out + [Token("bad", f"malformed number '{text[pos:bad]}'", pos, bad)]
            if nxt in ("e", "E") and not (after.isascii() and (after.isalnum() or after == "_")):
                # 1e, 1e+, 2e-x: an exponent without digits; 2e is not read as 2*e either. (2ex is 2 ex.)
                bad = end + (2 if after in ("+", "-") else 1)
                hint = f"write an exponent with digits (such as {word}e3), or {word}*e for the constant e"
                return out + [Token("bad", f"malformed number '{text[pos:bad]}'", pos, bad, hint)]
            value = float(word)
            if math.isinf(value):
                return out + [Token("bad", f"number {word} is too large", pos, end)]
            out.append(Token("num", word, pos, end, value))
        elif kind == "punct":
            out.append(Token(word, word, pos, end))
        elif kind != "space":
            out.append(Token(kind, word, pos, end))
        pos = end
    out.append(_Token("end", "", n, n))
    return out


# --- the grammar's tables -----------------------------------------------------------------------------

_BINARY = {"+": ("add", 1, False), "-": ("sub", 1, False), "*": ("mul", 2, False), "/": ("div", 2, False),
           "**": ("pow", 4, True), "^": ("pow", 4, True)}
_UNARY_PREC = 3  # below ** (so -x**2 == -(x**2)), above * / (so -x*y == (-x)*y)

# name -> (smallest, largest) argument count, None = no upper bound, and the usage shown with an error:
# the table's, and an alias takes its primitive's own arguments (ln(x, b) is not log's base form)
_ARITY = {name: PRIMITIVES[name].args for name in FUNCTION_NAMES if name not in ALIASES}
_ARITY.update({alias: (PRIMITIVES[target].arity,) * 2 for alias, target in ALIASES.items()})
_USAGE = {name: PRIMITIVES[name].usage for name in FUNCTION_NAMES if name not in ALIASES}


class _Pending:
    """An entry of the operator stack: a binary or unary operator, or an open parenthesis / call."""

    __slots__ = ("kind", "op", "prec", "tok", "paren", "nargs")

    def __init__(self, kind, op, prec, tok, paren=None):
        # tok: where errors about the entry point (a call's name); paren: its "(" for "unclosed '('"
        self.kind, self.op, self.prec, self.tok, self.paren, self.nargs = kind, op, prec, tok, paren, 0


# --- the parser ---------------------------------------------------------------------------------------

class _Parsed(NamedTuple):
    graph: Graph
    var_cols: dict  # variable -> column of its first appearance
    commas: list  # columns of the top-level commas


@dataclass(frozen=True)
class _State:
    """What the parser's steps share: the text and its tokens, the graph being built, the operand and
    operator stacks, and what the result reports (outputs, top-level commas, each variable's first column)."""

    text: str
    tokens: list
    builder: GraphBuilder
    max_depth: int
    operands: list
    ops: list
    outputs: list
    commas: list
    var_cols: dict

    def fail(self, message, tok, hint=None):
        """Raise the ParseError ``message`` at ``tok``."""
        raise ParseError(message, tok.col, self.text, hint)

    def push(self, entry):
        """Put ``entry`` on the operator stack, which is the nesting that ``max_depth`` bounds."""
        if len(self.ops) >= self.max_depth:
            self.fail(f"expression nested deeper than {self.max_depth} levels", entry.tok)
        self.ops.append(entry)

    def reduce_top(self):
        """Apply the operator on top of the stack to its operands."""
        e = self.ops.pop()
        operands = self.operands
        if e.kind == "neg":
            operands.append(self.builder.apply("neg", operands.pop()))
        else:
            y = operands.pop()
            operands.append(self.builder.apply(e.op, operands.pop(), y))

    def reduce_to_marker(self):
        """Apply the operators down to the innermost open parenthesis or call -> it, or None at the top level."""
        ops = self.ops
        while ops and ops[-1].prec > 0:  # parentheses and calls have no precedence (-1)
            self.reduce_top()
        return ops[-1] if ops else None


def _parse(text: str, max_length: int, max_depth: int, max_nodes: int) -> _Parsed:
    """The graph of ``text``, where its variables first appear and its top-level commas are."""
    if not isinstance(text, str):
        raise TypeError(f"expression must be a str, not {type(text).__name__}")
    tokens = _tokenize(text, max_length)
    s = _State(text, tokens, GraphBuilder(max_nodes=max_nodes), max_depth, [], [], [], [], {})
    expect_operand, prev, i = True, None, 0
    try:
        while True:
            tok = tokens[i]
            if tok.kind == "bad":
                s.fail(tok.text, tok, tok.value)
            if expect_operand:
                i, expect_operand = _operand(s, i, prev)
            elif tok.kind == "end":
                top = s.reduce_to_marker()
                if top is not None:
                    s.fail("unclosed '('", top.paren, "add the missing ')'")
                s.outputs.append(s.operands.pop())
                break
            else:
                expect_operand = _after_operand(s, i)
            prev = tokens[i]
            i += 1
    except GraphError as exc:  # the node limit
        raise ParseError(str(exc), tokens[i].col, text) from None
    return _Parsed(s.builder.build(s.outputs), s.var_cols, s.commas)


def _operand(s: _State, i: int, prev) -> tuple[int, bool]:
    """tokens[i] where an operand is expected: a number, a name, '(' or a unary sign -> the index of the
    last token it took and whether an operand is still expected."""
    tok = s.tokens[i]
    kind = tok.kind
    if kind == "num":
        s.operands.append(s.builder.const(tok.value, tok.text))
        return i, False
    if kind == "name":
        return _name(s, i)
    if kind == "(":
        s.push(_Pending("paren", "(", -1, tok, tok))
    elif kind == "op" and tok.text in "+-":
        if tok.text == "-":  # unary plus changes nothing and is dropped
            s.push(_Pending("neg", "neg", _UNARY_PREC, tok))
    else:
        _missing_operand(s, tok, prev)
    return i, True


def _name(s: _State, i: int) -> tuple[int, bool]:
    """The name tokens[i] as an operand: a call (which takes the '(' after it), a constant or a variable,
    -> as :func:`_operand`."""
    tokens = s.tokens
    tok = tokens[i]
    name, call = tok.text, tokens[i + 1].kind == "("
    if name.startswith("__"):
        s.fail(f"name {name!r} is reserved: names may not start with '__'", tok)
    if call:
        if name in CONSTANTS:
            s.fail(f"{name} is a constant, not a function", tok, times_hint(s.text, tokens, i + 1))
        if name not in FUNCTION_NAMES:
            s.fail(f"unknown function {name!r}", tok, unknown_function_hint(name))
        s.push(_Pending("call", name, -1, tok, tokens[i + 1]))
        return i + 1, True  # the "(" belongs to the call
    if name in FUNCTION_NAMES:
        s.fail(f"{name} is a function; call it as {name}(...)", tok)
    if name in CONSTANTS:
        s.operands.append(s.builder.const(CONSTANTS[name], name))
    else:
        s.var_cols.setdefault(name, tok.col)
        s.operands.append(s.builder.var(name))
    return i, False


def _after_operand(s: _State, i: int) -> bool:
    """tokens[i] right after an operand: a binary operator, ')' or ',' (anything else is an error) -> whether
    an operand is expected next."""
    tok = s.tokens[i]
    kind = tok.kind
    if kind == "op":
        op, prec, right = _BINARY[tok.text]
        ops = s.ops
        while ops and (ops[-1].prec > prec or (ops[-1].prec == prec and not right)):
            s.reduce_top()
        s.push(_Pending("bin", op, prec, tok))
        return True
    if kind == ")":
        top = s.reduce_to_marker()
        if top is None:
            s.fail("unmatched ')'", tok, "remove it, or add the '(' it closes")
        s.ops.pop()
        if top.kind == "call":
            top.nargs += 1
            _finish_call(s, top)
        return False
    if kind == ",":
        top = s.reduce_to_marker()
        if top is None:
            s.outputs.append(s.operands.pop())
            s.commas.append(tok.col)
        elif top.kind == "call":
            top.nargs += 1
        else:
            s.fail("',' inside parentheses", tok, "outputs are separated at the top level: x*y, x+y")
        return True
    s.fail(f"missing operator before {tok.text!r}", tok, times_hint(s.text, s.tokens, i))


def _finish_call(s: _State, e: _Pending) -> None:
    """Replace a closed call's arguments on the operand stack by its node, once their count is checked."""
    name, n = e.op, e.nargs
    lo, hi = _ARITY[name]
    target = ALIASES.get(name, name)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo} or more" if hi is None else f"{lo} or {hi}" if hi != lo else str(lo)
        s.fail(f"{name} takes {want} argument{'' if want == '1' else 's'}, got {n}", e.tok,
               f"usage: {_USAGE.get(name, name + '(x)')}")
    operands, b = s.operands, s.builder
    args = operands[-n:]
    del operands[-n:]
    arity = PRIMITIVES[target].arity
    if target == "log" and n == 2:  # log base b, as the change of base: log(x) / log(b)
        out = b.apply("div", b.apply("log", args[0]), b.apply("log", args[1]))
    elif n > arity:  # min(a, b, c): a binary primitive with no upper bound folds from the left
        out = args[0]
        for a in args[1:]:
            out = b.apply(target, out, a)
    else:
        out = b.apply(target, *args)
    operands.append(out)


def _missing_operand(s: _State, tok, prev) -> None:
    """An operand was expected but tok came (after prev, None at the start): name what is missing, where."""
    if prev is None:
        if tok.kind == "end":
            s.fail("empty expression", tok)
        if tok.kind == ")":
            s.fail("unmatched ')'", tok, "remove it, or add the '(' it closes")
        s.fail(f"missing operand before {tok.text!r}", tok)
    if prev.kind == "op":
        s.fail(f"missing operand after {prev.text!r}", prev)
    if prev.kind == "(":
        if tok.kind == "end":
            s.fail("unclosed '('", prev, "add the missing ')'")
        if tok.kind == ")" and s.ops[-1].kind == "paren":
            s.fail("empty parentheses", prev)
        if tok.kind == ")":
            _finish_call(s, s.ops.pop())  # f(): reports the argument count
        s.fail(f"missing argument before {tok.text!r}", tok)
    if tok.kind == "end":  # prev is a comma, as below
        s.fail("trailing comma", prev, "remove the last ',' or add another expression after it")
    if tok.kind == ")":
        s.fail("missing argument after ','", prev)
    s.fail("empty element before ','", tok)


def parse(text: str, *, max_length: int = 100_000, max_depth: int = 10_000,
          max_nodes: int = 1_000_000) -> Graph:
    """Parse an expression such as ``"x**2*sin(y)"`` or ``"x*y, x+y"`` (one output per top-level
    comma) into a hash-consed Graph whose variables are in order of first appearance.

    Raises ParseError (a ValueError) with a column and a hint for anything it cannot read.
    """
    return _parse(text, max_length, max_depth, max_nodes).graph


def parse_constant(text: str, *, max_length: int = 10_000) -> float:
    """The value of a constant expression such as ``"pi/4"`` or ``"-1e-3"`` (for ``--at x=pi/4``).

    A variable, several values, or a value that is not a finite number is a ParseError.
    """
    parsed = _parse(text, max_length, 1_000, 100_000)
    if parsed.var_cols:
        name, col = next(iter(parsed.var_cols.items()))
        if name.lower() in ("nan", "inf", "infinity"):  # meant as a number, which a point cannot be
            raise ParseError(f"{name} is not a finite number: gradcli evaluates at finite values only", col, text,
                             "give a finite value, such as 1e300")
        raise ParseError(f"variable {name!r} in a constant expression", col, text,
                         "use numbers, pi, e and functions, such as pi/4")
    if parsed.commas:
        raise ParseError(f"expected one value, got {len(parsed.commas) + 1}", parsed.commas[0], text)
    with np.errstate(all="ignore"):
        value = float(evaluate(parsed.graph, {})[0])
    if not math.isfinite(value):
        raise ParseError(f"value is not a finite number ({value})", 1, text)
    return value


def parse_expression(expr: str) -> Graph:
    """The graph of ``expr``; a parse error becomes :class:`BadInput` (one line, a caret under the column)."""
    if not isinstance(expr, str):
        raise BadInput(f"an expression must be a string, got {type(expr).__name__}")
    try:
        return parse(expr)
    except ParseError as exc:
        raise BadInput(exc.one_line(), detail=exc.caret(), column=exc.column) from None
