"""The expression language (docs/contract.md, the expression language): grammar, graph shape, errors, limits."""
from __future__ import annotations

import math
import pathlib
import pickle
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcli.core.graph import Graph, evaluate
from gradcli.core.parse_hints import suggest_call, suspicious_variables
from gradcli.core.parser import ParseError, parse, parse_constant
from gradcli.core.primitives import FUNCTION_NAMES, PRIMITIVES

X, Y, Z = 1.7, -0.3, 2.5
POINT = {"x": X, "y": Y, "z": Z}


def value(text, point=POINT, **limits):
    out = evaluate(parse(text, **limits), point)
    assert len(out) == 1
    return float(out[0])


def ops(graph):
    return [n.op for n in graph.nodes]


def error(text, **limits) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text, **limits)
    return info.value


# --- numbers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, number", [
    ("2", 2.0), ("0.5", 0.5), (".5", 0.5), ("1e-3", 0.001), ("2.5E+3", 2500.0), ("1.", 1.0),
    ("1.e2", 100.0), ("007", 7.0), ("1E5", 1e5), ("0.1", 0.1),
])
def test_number_forms_keep_their_source_text(text, number):
    graph = parse(text)
    (node,) = graph.nodes
    assert node.op == "const"
    assert node.attr.value == number
    assert node.attr.text == text
    assert graph.variables == ()


def test_decimal_text_gives_the_exact_rational():
    (node,) = parse("0.1").nodes
    assert node.attr.exact() == Fraction(1, 10)
    (node,) = parse("2").nodes
    assert node.attr.text == "2" and node.attr.exact() == 2


def test_repeated_numbers_are_one_node():
    graph = parse("x*2 + 2")
    assert sum(1 for n in graph.nodes if n.op == "const") == 1


# --- precedence and associativity, against Python's own arithmetic ------------------------------------

x, y, z = X, Y, Z
PRECEDENCE = [
    ("x + y * z", x + y * z),
    ("x * y + z", x * y + z),
    ("x - y - z", (x - y) - z),
    ("x / y / z", (x / y) / z),
    ("x - y + z", (x - y) + z),
    ("x / y * z", (x / y) * z),
    ("-x**2", -(x**2)),
    ("-x^2", -(x**2)),
    ("2**3**2", 2.0**9),
    ("2^3^2", 512.0),
    ("x**z**y", x ** (z**y)),
    ("(x**z)**y", (x**z) ** y),
    ("x**-2", x**-2),
    ("2**-x", 2**-x),
    ("2**-x**2", 2 ** (-(x**2))),
    ("x**-y*z", (x**-y) * z),
    ("-x**-y", -(x ** (-y))),
    ("-x*y", (-x) * y),
    ("-x + y", (-x) + y),
    ("x*-y", x * -y),
    ("x - -y", x - (-y)),
    ("--x", x),
    ("+x", x),
    ("-+-x", x),
    ("x ** + 2", x**2),
    ("(x + y) * z", (x + y) * z),
    ("(-x)**2", (-x) ** 2),
    ("2*x**2/3", 2 * x**2 / 3),
    ("x / y**2 * z", x / y**2 * z),
    ("x^y*z^2", x**y * z**2),
    ("((x))", x),
    ("1 - 2 - 3 - 4", ((1 - 2) - 3) - 4.0),
    ("2 * -3 ** 2", 2 * -(3**2)),
]


@pytest.mark.parametrize("text, expected", PRECEDENCE, ids=[t for t, _ in PRECEDENCE])
def test_precedence_matches_python(text, expected):
    assert value(text) == pytest.approx(expected, rel=1e-15)


def test_unary_minus_is_neg_and_unary_plus_is_dropped():
    assert ops(parse("-x")) == ["var", "neg"]
    assert ops(parse("+x")) == ["var"]
    assert ops(parse("-x**2"))[-1] == "neg"
    assert ops(parse("x - y"))[-1] == "sub"
    assert ops(parse("x ^ y"))[-1] == "pow"


def test_whitespace_is_free():
    assert value(" \t x*\n y ") == pytest.approx(x * y)


# --- graph shape --------------------------------------------------------------------------------------

def test_shared_subexpressions_are_one_node():
    graph = parse("sin(x)*sin(x)")
    assert ops(graph).count("sin") == 1
    mul = graph.nodes[graph.outputs[0]]
    assert mul.op == "mul" and mul.args[0] == mul.args[1]
    graph = parse("x*y + x*y")
    assert ops(graph) == ["var", "var", "mul", "add"]
    assert value("x*y + x*y") == pytest.approx(2 * x * y)


def test_variables_in_order_of_first_appearance():
    assert parse("y*x + z*y + x").variables == ("y", "x", "z")
    assert parse("b_2 + alpha + _c + b_2").variables == ("b_2", "alpha", "_c")


def test_vector_outputs():
    graph = parse("x*y, x+y, 3")
    assert len(graph.outputs) == 3 and graph.variables == ("x", "y")
    got = [float(v) for v in evaluate(graph, POINT)]
    assert got == pytest.approx([x * y, x + y, 3.0])
    graph = parse("x, x")
    assert graph.outputs[0] == graph.outputs[1]


def test_constants_pi_and_e():
    graph = parse("pi + e")
    assert graph.variables == ()
    assert {n.attr.text for n in graph.nodes if n.op == "const"} == {"pi", "e"}
    assert value("pi") == math.pi and value("e") == math.e
    assert value("2*pi*x") == pytest.approx(2 * math.pi * x)
    assert parse("pie + ex").variables == ("pie", "ex")


# --- functions ------------------------------------------------------------------------------------------

def test_every_function_name_parses_with_its_arity():
    for name in FUNCTION_NAMES:
        prim = PRIMITIVES["log" if name == "ln" else name]
        args = ", ".join(["x", "y", "z"][:prim.arity])
        graph = parse(f"{name}({args})")
        assert graph.nodes[graph.outputs[0]].op == prim.name, name


@pytest.mark.parametrize("text, expected", [
    ("sin(x)", math.sin(x)), ("exp(x)", math.exp(x)), ("ln(x)", math.log(x)),
    ("log(x)", math.log(x)), ("log(8, 2)", 3.0), ("log(x, z)", math.log(x) / math.log(z)),
    ("atan2(y, x)", math.atan2(y, x)), ("pow(x, z)", x**z), ("hypot(x, z)", math.hypot(x, z)),
    ("min(x, y)", y), ("max(x, y, z)", z), ("min(z, x, y, 4)", y), ("max(-x, y)", y),
    ("sqrt(abs(y))", math.sqrt(abs(y))), ("sin(cos(tan(x)))", math.sin(math.cos(math.tan(x)))),
])
def test_function_values(text, expected):
    assert value(text) == pytest.approx(expected, rel=1e-14)


def test_log_base_is_a_change_of_base():
    graph = parse("log(x, 2)")
    top = graph.nodes[graph.outputs[0]]
    assert top.op == "div"
    assert [graph.nodes[a].op for a in top.args] == ["log", "log"]


def test_ln_is_log_and_pow_is_power():
    assert ops(parse("ln(x) - log(x)")).count("log") == 1
    assert ops(parse("pow(x, y) - x**y")).count("pow") == 1
    assert ops(parse("pow(x, y) - x^y")).count("pow") == 1


def test_min_max_fold_left():
    graph = parse("min(x, y, z)")
    assert ops(graph) == ["var", "var", "var", "min", "min"]
    top = graph.nodes[graph.outputs[0]]
    assert graph.nodes[top.args[0]].op == "min" and graph.nodes[top.args[1]].attr == "z"
    assert ops(parse("max(x, y, z, x)")).count("max") == 3


def test_function_like_names_are_variables():
    assert parse("sinx").variables == ("sinx",)
    assert parse("step + add + neg").variables == ("step", "add", "neg")  # internal primitives


# --- errors --------------------------------------------------------------------------------------------

ERRORS = [
    # text, message part, column, hint part (None: no hint)
    ("x $ y", "unexpected character '$'", 3, None),
    ("x [y]", "unexpected character '['", 3, "( )"),
    ("x = 1", "unexpected character '='", 3, None),
    ("(x + 1", "unclosed '('", 1, "')'"),
    ("sin(x + (y)", "unclosed '('", 4, "')'"),
    ("((x)", "unclosed '('", 1, None),
    ("x + 1)", "unmatched ')'", 6, None),
    (")", "unmatched ')'", 1, None),
    ("x +", "missing operand after '+'", 3, None),
    ("x + ", "missing operand after '+'", 3, None),
    ("* x", "missing operand before '*'", 1, None),
    ("x + * y", "missing operand", 3, None),
    ("(x + )", "missing operand after '+'", 4, None),
    ("-", "missing operand after '-'", 1, None),
    ("x **", "missing operand after '**'", 3, None),
    ("** x", "missing operand before '**'", 1, None),
    ("x ^", "missing operand after '^'", 3, None),
    ("", "empty expression", 1, None),
    ("   ", "empty expression", 4, None),
    ("()", "empty parentheses", 1, None),
    ("2x", "missing operator", 2, "did you mean 2*x?"),
    ("2(x+1)", "missing operator", 2, "did you mean 2*(x+1)?"),
    ("x y", "missing operator", 3, "did you mean x*y?"),
    ("(x+1)(x-1)", "missing operator", 6, "did you mean (x+1)*(x-1)?"),
    ("y + 3 sin(x)", "missing operator", 7, "did you mean y + 3*sin(x)?"),
    ("sin(x)cos(x)", "missing operator", 7, "did you mean sin(x)*cos(x)?"),
    ("x*(2x)", "missing operator", 5, "did you mean x*(2*x)?"),
    ("x**2 sin(x)", "missing operator", 6, "did you mean x**2*sin(x)?"),
    ("1e5x", "missing operator", 4, "did you mean 1e5*x?"),
    ("sine(x)", "unknown function 'sine'", 1, "sin"),
    ("1 + sqr(x)", "unknown function 'sqr'", 5, "sqrt"),
    ("Sin(x)", "unknown function 'Sin'", 1, "sin"),
    ("f(x)", "unknown function 'f'", 1, "the functions are abs, acos"),
    ("sin + 1", "sin is a function; call it as sin(...)", 1, None),
    ("2 * exp", "exp is a function; call it as exp(...)", 5, None),
    ("pi(x)", "pi is a constant, not a function", 1, "pi*(x)"),
    ("e(2)", "e is a constant, not a function", 1, "e*(2)"),
    ("__x + 1", "reserved", 1, None),
    ("x + __class__", "reserved", 5, None),
    ("1.2.3", "malformed number '1.2.3'", 1, None),
    ("x + 1..2", "malformed number '1..2'", 5, None),
    ("1e", "malformed number '1e'", 1, "1e3"),
    ("2 * 1e+", "malformed number '1e+'", 5, None),
    ("1e999", "too large", 1, None),
    ("sin(x, y)", "sin takes 1 argument, got 2", 1, "sin(x)"),
    ("x + atan2(y)", "atan2 takes 2 arguments, got 1", 5, "atan2(y, x)"),
    ("cos()", "cos takes 1 argument, got 0", 1, None),
    ("log(x, 2, 3)", "log takes 1 or 2 arguments, got 3", 1, "log(x, b)"),
    ("ln(x, 2)", "ln takes 1 argument, got 2", 1, None),
    ("min(x)", "min takes 2 or more arguments, got 1", 1, None),
    ("max()", "max takes 2 or more arguments, got 0", 1, None),
    ("pow(x)", "pow takes 2 arguments, got 1", 1, None),
    ("x,", "trailing comma", 2, None),
    ("x, y,", "trailing comma", 5, None),
    ("x,,y", "empty element", 3, None),
    (", x", "missing operand before ','", 1, None),
    ("min(x,)", "missing argument after ','", 6, None),
    ("min(,x)", "missing argument before ','", 5, None),
    ("(x, y)", "',' inside parentheses", 3, None),
]


@pytest.mark.parametrize("text, message, column, hint", ERRORS, ids=[e[0] or "empty" for e in ERRORS])
def test_errors_name_the_column_and_suggest_a_fix(text, message, column, hint):
    err = error(text)
    assert isinstance(err, ValueError)
    assert message in err.message
    assert err.column == column
    assert err.text == text
    if hint is not None:
        assert err.hint and hint in err.hint


def test_render_points_a_caret_at_the_column():
    err = error("x + 2x")
    lines = str(err).splitlines()
    assert lines == [
        "error: missing operator before 'x' at column 6",
        "x + 2x",
        "     ^",
        "hint: did you mean x + 2*x?",
    ]
    assert err.render() == str(err)
    assert err.caret() == "x + 2x\n     ^"
    assert err.one_line() == "missing operator before 'x' (column 6); did you mean x + 2*x?"


def test_render_without_hint_and_one_line():
    err = error("x $ y")
    assert str(err).splitlines() == ["error: unexpected character '$' at column 3", "x $ y", "  ^"]
    assert err.one_line() == "unexpected character '$' (column 3)"
    assert error("(x").one_line().startswith("unclosed '(' (column 1); ")


def test_render_keeps_the_caret_under_tabs_and_in_long_text():
    lines = str(error("x\t$")).splitlines()
    assert lines[1] == "x $" and lines[2].index("^") == 2
    text = "x + " * 100 + "$" + " + y" * 100
    lines = str(error(text)).splitlines()
    assert len(lines[1]) < 120 and lines[1].startswith("...") and lines[1].endswith("...")
    assert lines[1][lines[2].index("^")] == "$"


def test_parse_error_pickles():
    err = pickle.loads(pickle.dumps(error("2x")))
    assert (err.message, err.column, err.text, err.hint) == ("missing operator before 'x'", 2, "2x",
                                                               "did you mean 2*x?")


def test_unknown_function_lists_the_closest_names():
    hint = error("tanhh(x)").hint
    assert hint.startswith("did you mean tanh")
    assert error("qqqq()").hint == "the functions are " + ", ".join(sorted(FUNCTION_NAMES))  # nothing close


@pytest.mark.parametrize("text", ["foo(x)", "factorial(x)", "dot(x, x)", "qqqq(x)", "f(x + 1)"])
def test_an_unknown_function_is_never_suggested_as_a_product(text):
    # foo*(x) would be a different expression: a call is not a product
    err = error(text)
    name = text.partition("(")[0]
    assert err.message == f"unknown function {name!r}" and err.column == 1
    assert "*" not in err.hint and err.hint == "the functions are " + ", ".join(sorted(FUNCTION_NAMES))


@pytest.mark.parametrize("text, column, meant", [
    ("x**2 sin(x)", 6, "x**2*sin(x)"),
    ("y + 3 sin(x)", 7, "y + 3*sin(x)"),
    ("-x**2 exp(y)", 7, "-x**2*exp(y)"),
    ("2 ** x y", 8, "2 ** x*y"),
])
def test_a_missing_operator_hint_keeps_the_whole_expression(text, column, meant):
    err = error(text)
    assert (err.column, err.hint) == (column, f"did you mean {meant}?")
    parse(meant)  # what the hint suggests is itself an expression


def test_a_missing_operator_in_a_long_expression_names_the_two_tokens():
    text = " + ".join(["x**2"] * 20) + " + 2 y"
    err = error(text)
    assert err.hint == "insert * between '2' and 'y'" and text[err.column - 1] == "y"


@pytest.mark.parametrize("text, hint", [
    ("np.sin(x)", "write sin(x): functions are used without a module prefix"),
    ("math.exp(x)", "write exp(x): functions are used without a module prefix"),
    ("numpy.sin(x)", "write sin(x): functions are used without a module prefix"),
    ("torch.sin(x**2 + 1)", "write sin(x**2 + 1): functions are used without a module prefix"),
    ("jax.numpy.tanh(x)", "write tanh(x): functions are used without a module prefix"),
    ("2*math.pi*x", "write pi: constants are used without a module prefix"),
    ("np.sin(x", "write sin(...): functions are used without a module prefix"),
    ("np.sinn(x)", "functions are used without a module prefix; did you mean sin"),
])
def test_a_module_prefix_gets_the_call_without_it(text, hint):
    err = error(text)
    assert err.message == "unexpected character '.'" and text[err.column - 1] == "."
    assert err.hint.startswith(hint)


def test_a_dot_that_is_no_module_prefix_gets_no_prefix_hint():
    assert error("x.y").hint is None
    assert error("np.foo + 1").hint is None


def test_errors_are_reported_left_to_right():
    assert error("2x + $").column == 2
    assert error("x + $ + 2x").column == 5


# --- limits ----------------------------------------------------------------------------------------------

def test_deep_nesting_is_a_clean_error():
    err = error("(" * 50_000 + "x" + ")" * 50_000)
    assert err.message == "expression nested deeper than 10000 levels"
    assert err.column == 10_001
    assert "nested deeper than 5 levels" in error("sin(" * 6 + "x" + ")" * 6, max_depth=5).message
    assert "nested deeper" in error("-" * 50_000 + "x").message


def test_nesting_below_the_limit_needs_no_recursion():
    # far deeper than Python's recursion limit: only an iterative parser (and evaluator) gets through
    assert value("(" * 5_000 + "x" + ")" * 5_000) == x
    assert value("-" * 3_001 + "x") == -x
    graph = parse("sin(" * 3_000 + "x" + ")" * 3_000)
    assert len(graph) == 3_001
    assert value("1**" * 2_000 + "x") == 1.0  # right-associative: an operator stack 2,000 deep


def test_a_sum_of_20000_terms_parses():
    text = "+".join(f"x*{k}" for k in range(20_000))
    graph = parse(text, max_length=200_000)
    expected = 0.0
    for k in range(20_000):
        expected = expected + x * k
    assert float(evaluate(graph, POINT)[0]) == pytest.approx(expected, rel=1e-12)
    assert value("+".join(["x"] * 20_000)) == pytest.approx(20_000 * x, rel=1e-12)


def test_too_long():
    err = error("x+" * 60_000 + "x")
    assert err.message == "expression longer than 100000 characters"
    assert err.column == 100_001
    assert "longer than 10 characters" in error("x" * 11, max_length=10).message
    assert error("abcdefghijk", max_length=10).column == 11
    assert parse("x" * 10, max_length=10).variables == ("x" * 10,)


def test_too_many_nodes():
    err = error("x + 1 + 2 + 3 + 4 + 5", max_nodes=6)
    assert "more than 6 nodes" in err.message
    assert len(parse("x + 1 + 2", max_nodes=5)) == 5
    # hash-consing: repeats cost nothing
    assert len(parse("+".join(["sin(x)"] * 3), max_nodes=4)) == 4


# --- constants for --at -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("pi/4", math.pi / 4), ("2", 2.0), ("-1e-3", -0.001), ("sqrt(2)/2", math.sqrt(2) / 2),
    ("e**2", math.e**2), (" -pi ", -math.pi), ("log(8, 2)", 3.0),
])
def test_parse_constant(text, expected):
    got = parse_constant(text)
    assert type(got) is float and got == pytest.approx(expected, rel=1e-15)


def test_parse_constant_errors():
    err = pytest.raises(ParseError, parse_constant, "pi/4 + x").value
    assert "'x'" in err.message and err.column == 8
    err = pytest.raises(ParseError, parse_constant, "1, 2").value
    assert "one value" in err.message and err.column == 2
    assert "finite" in pytest.raises(ParseError, parse_constant, "log(-1)").value.message
    assert "finite" in pytest.raises(ParseError, parse_constant, "1/0").value.message
    assert pytest.raises(ParseError, parse_constant, "2pi").value.hint == "did you mean 2*pi?"


# --- warnings for the CLI ----------------------------------------------------------------------------------

def test_suspicious_variables():
    assert suspicious_variables(parse("sinx + expx*y + cosine + abs(t)")) == ["sinx", "expx"]
    assert suspicious_variables(["sinhx", "logxy", "x", "exp2", "sin_x", "expected"]) == ["sinhx", "logxy"]
    assert suggest_call("sinx") == "sin(x)"
    assert suggest_call("sinhx") == "sinh(x)"
    assert suggest_call("x") is None


# --- no eval, anywhere -----------------------------------------------------------------------------------

def test_parser_source_never_evaluates_text():
    source = (pathlib.Path(__file__).parents[1] / "gradcli" / "core" / "parser.py").read_text()
    for banned in ("eval(", "exec(", "sympify", "import ast", "__import__", "getattr("):
        assert banned not in source
    assert not re.search(r"(?<!re\.)\bcompile\(", source)


# --- property: random arithmetic against Python's value --------------------------------------------------

LEAVES = {"x": X, "y": Y, "z": Z, "2": 2.0, "0.5": 0.5, ".25": 0.25, "3": 3.0, "1e-1": 0.1}
BINARY = {"+": (1, lambda a, b: a + b), "-": (1, lambda a, b: a - b), "*": (2, lambda a, b: a * b),
          "/": (2, lambda a, b: a / b), "**": (4, lambda a, b: a**b), "^": (4, lambda a, b: a**b)}


def _tree(draw_leaf, max_leaves):
    return st.recursive(
        draw_leaf,
        lambda inner: st.one_of(
            st.tuples(st.just("neg"), inner, st.booleans()),
            st.tuples(st.sampled_from(sorted(BINARY)), inner, inner, st.booleans()),
        ),
        max_leaves=max_leaves,
    )


def _render(tree):
    """(text, python value, precedence) of a tree, with only the parentheses Python needs, plus the
    ones hypothesis chose to add. Built with an explicit stack, like the parser under test."""
    results, stack = [], [(tree, False)]
    while stack:
        node, done = stack.pop()
        if isinstance(node, str):
            results.append((node, LEAVES[node], 9))
        elif not done:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node[1:-1]))
        elif node[0] == "neg":
            text, val, prec = results.pop()
            if prec < 3:
                text = f"({text})"
            results.append(_paren(f"-{text}", -val, 3, node[-1]))
        else:
            (rt, rv, rp), (lt, lv, lp) = results.pop(), results.pop()
            op = node[0]
            prec, fn = BINARY[op]
            if prec == 4:  # right-assoc: the left needs parentheses at equal precedence or a unary minus
                lt = f"({lt})" if lp <= 4 else lt
                rt = f"({rt})" if rp < 3 else rt  # x**-y is fine
            else:
                lt = f"({lt})" if lp < prec else lt
                rt = f"({rt})" if rp <= prec else rt
            results.append(_paren(f"{lt} {op} {rt}", _python(fn, lv, rv), prec, node[-1]))
    return results.pop()[:2]


def _paren(text, val, prec, extra):
    return (f"({text})", val, 9) if extra else (text, val, prec)


def _python(fn, a, b):
    try:
        out = fn(a, b)
    except (ZeroDivisionError, OverflowError):
        return math.nan
    return out if isinstance(out, float) and not isinstance(out, complex) else math.nan


@settings(max_examples=300, deadline=None)
@given(_tree(st.sampled_from(sorted(LEAVES)), max_leaves=12))
def test_random_arithmetic_matches_python(tree):
    text, expected = _render(tree)
    if not (isinstance(expected, float) and math.isfinite(expected)):
        return
    with np.errstate(all="ignore"):
        got = float(evaluate(parse(text), POINT)[0])
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-300), text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="xy12.e+-*/^()sin, $", max_size=30))
def test_any_text_parses_or_raises_parse_error(text):
    try:
        graph = parse(text)
    except ParseError as err:
        assert 1 <= err.column <= len(text) + 1
        assert err.render().splitlines()[0].startswith("error: ")
    else:
        assert isinstance(graph, Graph) and len(graph.outputs) >= 1
