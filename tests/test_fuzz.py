"""Fuzzing the command line with hostile input: whatever the text, point, option or points file, a run
ends with an exit code of the contract (0, 1, 2, 3), never a traceback, and under ``--json`` stdout is
exactly one JSON document whose status agrees with the exit code. Derandomised in CI (conftest.py)."""
import json
import os
import string
import tempfile

import numpy as np
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradcli
from gradcli.cli import main
from gradcli.core.primitives import PRIMITIVES
import sympy
from tests.strategies import expressions
from tests.test_table_walk import extreme_candidates, inside, mp_float, representable, sympy_derivatives, sym_args

RUNNER = CliRunner()
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: the status -> exit code table of the contract, for the point commands
POINT_CODES = {"agree": 0, "disagree": 1, "error": 2, "undefined": 3, "nondifferentiable": 3,
               "ill_conditioned": 3}

#: characters of the language and a few that are not (control characters and escape sequences included)
ALPHABET = string.ascii_letters[:26] + string.digits + " .+-*/()e,^_[]=:;!@#$%&|~'\"\\\t\n\x1b\x00\x7f∂é"


def invoke(args):
    r = RUNNER.invoke(main, args, catch_exceptions=True)
    assert r.exception is None or isinstance(r.exception, SystemExit), \
        f"{args!r} raised {type(r.exception).__name__}: {r.exception}"
    assert r.exit_code in (0, 1, 2, 3), (args, r.exit_code, r.output)
    # (a model's own traceback is part of its check's report: only stderr must have none)
    assert "Traceback (most recent call last)" not in r.stderr, (args, r.stderr)
    return r


def one_document(r, args, key="status"):
    doc = json.loads(r.stdout)  # exactly one document: trailing text would not parse
    assert isinstance(doc, dict) and key in doc, (args, r.stdout)
    return doc


@FUZZ
@given(text=st.text(ALPHABET, max_size=40))
def test_any_expression_text_ends_cleanly(text):
    args = ["grad", text, "--at", "x=1.5", "--json", "--timeout", "1"]
    r = invoke(args)
    if r.exit_code == 2 and not r.stdout.strip():
        return  # click's own usage error for an option-like text: stderr says it
    if text == "--help":  # asked for by name (no expression reads so): the help, not a report
        assert r.exit_code == 0 and r.stdout.startswith("Usage:"), (args, r.stdout)
        return
    doc = one_document(r, args)
    assert POINT_CODES.get(doc["status"], 2) == r.exit_code, (args, doc["status"], r.exit_code)


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
                   st.sampled_from(["pi/4", "1e-400", "1e400", "-0.0", "nan", "inf", "", "x", "1,2", "1e-10000000"]))


@FUZZ
@given(expr=expressions, x=values, y=values)
def test_any_expression_at_any_point_ends_cleanly(expr, x, y):
    args = ["grad", expr, "--at", f"x={x}", "--at", f"y={y}", "--at", "z=0.5", "--json", "--timeout", "1"]
    r = invoke(args)
    doc = one_document(r, args)
    assert POINT_CODES.get(doc["status"], 2) == r.exit_code, (args, doc["status"], r.exit_code)


#: subexpressions the gradient compiler folds to a constant, 0 among them
folded = st.sampled_from(["(1-1)", "(0*x)", "(2-2)**2", "(1-1)/(1-1)", "log(1-1)", "(3-3)**-1"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions, c=folded, op=st.sampled_from(["/", "*", "+", "**"]))
def test_any_expression_with_a_folded_constant_in_batch_mode_ends_cleanly(expr, c, op):
    # (+ x*y*z: every variable of the domain is one of the expression)
    args = ["grad", f"({expr}){op}{c} + x*y*z", "--batch", "8", "--domain", "x=0.1:1, y=0.1:1, z=0.1:1", "--json",
            "--timeout", "2"]
    r = invoke(args)
    doc = one_document(r, args)
    assert doc["status"] != "error" or "timed out" in doc.get("error", ""), (args, doc)


option_values = st.one_of(st.text(ALPHABET, max_size=8), st.floats(allow_nan=True).map(repr),
                          st.integers(-5, 10**20).map(str))


@FUZZ
@given(option=st.sampled_from(["--rtol", "--atol", "--timeout", "--method", "--direction", "--format"]),
       value=option_values)
def test_any_option_value_ends_cleanly(option, value):
    args = ["grad", "x*sin(y)", "--at", "x=1", "--at", "y=2", option, value, "--json"]
    r = invoke(args)
    if r.stdout.strip():
        one_document(r, args)


@FUZZ
@given(command=st.sampled_from(["hessian", "explain"]), expr=expressions)
def test_hessian_and_explain_end_cleanly(command, expr):
    args = [command, expr, "--at", "x=0.7", "--at", "y=-1.3", "--at", "z=2", "--json", "--timeout", "1"]
    r = invoke(args)
    one_document(r, args)


arrays = st.one_of(
    st.builds(lambda n, seed: np.random.default_rng(seed).uniform(-3, 3, size=(n, 2)),
              st.integers(0, 50), st.integers(0, 10**6)),
    st.sampled_from([np.zeros((3, 2), dtype=bool), np.array([[1 + 2j, 3]]), np.array([["a", "b"]]),
                     np.array([[np.nan, np.inf], [1.0, -np.inf]]), np.zeros((0, 2)), np.zeros((2,)),
                     np.zeros((2, 3, 1)), np.array(5.0), np.zeros((4, 2), dtype="datetime64[s]")]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=arrays, ext=st.sampled_from(["npy", "csv"]))
def test_any_points_file_ends_cleanly(a, ext):
    with tempfile.TemporaryDirectory() as tmp:
        points_file_ends_cleanly(tmp, a, ext)


def points_file_ends_cleanly(tmp_path, a, ext):
    path = os.path.join(tmp_path, f"points.{ext}")
    if ext == "npy":
        np.save(path, a, allow_pickle=False)
    else:
        with open(path, "w") as fh:
            fh.write("x,y\n")
            for row in np.atleast_2d(a):
                fh.write(",".join(str(v) for v in np.atleast_1d(row)) + "\n")
    args = ["grad", "x*sin(y)", "--points", path, "--json", "--timeout", "1"]
    r = invoke(args)
    one_document(r, args)
    assert sorted(os.listdir(tmp_path)) == [f"points.{ext}"]  # nothing left behind


BEHAVIOURS = {
    "correct": "return 2 * x",
    "wrong": "return 3 * x",
    "raises": "raise ValueError('bad')",
    "nan": "return x * np.nan",
    "shape": "return np.zeros(7)",
    "none": "return None",
    "ragged": "return [[1.0], [1.0, 2.0]]",
    "ragged_rows": "return [[1.0, 2.0], [3.0]]",
    "unprintable": "raise type('E', (Exception,), {'__str__': lambda self: 1 / 0})()",
    "surrogate": "raise ValueError('bad \\ud800 text')",
    "complex": "return 2 * x + 1j",
    "prints": "print('noise on stdout'); return 2 * x",
    "exits": "import sys; sys.exit(0)",
    "keyboard": "raise KeyboardInterrupt",
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(behaviour=st.sampled_from(sorted(BEHAVIOURS)), shape=st.sampled_from(["(3,)", "(0,)", "(2, 2)", "()"]))
def test_any_model_behaviour_ends_cleanly(behaviour, shape):
    with tempfile.TemporaryDirectory() as tmp:
        model_behaviour_ends_cleanly(tmp, behaviour, shape)


def model_behaviour_ends_cleanly(tmp_path, behaviour, shape):
    model = os.path.join(tmp_path, "model.py")
    with open(model, "w") as fh:
        fh.write("import numpy as np\nimport gradcli\n\n"
                 f"@gradcli.check(x={shape})\ndef f(x):\n    return np.sum(x ** 2)\n\n"
                 f"@f.grad\ndef f_grad(x):\n    {BEHAVIOURS[behaviour]}\n")
    args = ["check", model, "--json"]
    r = invoke(args)
    doc = one_document(r, args, key="summary")
    statuses = [c["status"] for c in doc.get("checks", [])]
    if behaviour in ("correct",) and shape != "(0,)":
        assert statuses == ["pass"], doc
    if behaviour in ("wrong", "raises", "shape", "none", "ragged", "complex", "ragged_rows", "unprintable",
                     "surrogate") and shape not in ("(0,)",):
        assert statuses and statuses[0] in ("fail", "error"), (behaviour, doc)
    assert not any("internal error" in c["message"] for c in doc.get("checks", [])), doc


#: bytes a folder name may hold on POSIX (no "/" and no NUL), most of them not UTF-8
FOLDER_BYTES = st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b
                                                         and b not in (b".", b".."))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=FOLDER_BYTES)
def test_a_model_under_any_folder_name_is_checked(name):
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(os.fsencode(tmp), name)
        try:
            os.mkdir(folder)
        except OSError:  # a file system that takes only UTF-8 names
            return
        with open(os.path.join(folder, b"model.py"), "w") as fh:
            fh.write("import numpy as np\nimport gradcli\n\n@gradcli.check(x=(3,))\ndef f(x):\n"
                     "    return np.sum(x ** 2)\n\n@f.grad\ndef f_grad(x):\n    return 2 * x\n")
        args = ["check", os.fsdecode(folder), "--json"]
        doc = one_document(invoke(args), args, key="summary")
        assert [c["status"] for c in doc.get("checks", [])] == ["pass"], doc


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(n for n, p in PRIMITIVES.items() if p.public)), data=st.data())
def test_extreme_arguments_through_the_table(name, data):
    """One function of the table at extreme arguments (+-1e-300 ... 1e300, for two arguments mixed with
    +-1.5): where the value and the derivative are normal floats, forward and reverse mode agree with
    sympy, and with mpmath's value of sympy's derivative, whatever intermediate a partial's form has."""
    prim = PRIMITIVES[name]
    args = data.draw(st.sampled_from(extreme_candidates(prim.arity)))
    syms = sym_args(prim)
    value = mp_float(prim.sympy(*syms), syms, args)
    ds = [mp_float(d, syms, args) for d in sympy_derivatives(prim, syms)]
    if not inside(prim, args) or value is None or not representable(value) or \
            not all(d is not None and representable(d) for d in ds):
        return
    at = {f"v{k}": a for k, a in enumerate(args)}
    r = gradcli.grad(f"{name}({', '.join(at)})", methods=["forward", "reverse", "symbolic"], **at)
    assert r.status == "agree", (name, args, r.status, r.message)
    for k, d in enumerate(ds):
        assert abs(r.gradient[f"v{k}"] - d) <= 1e-11 * abs(d), (name, args, k, r.gradient, d)


_UNARY = sorted(n for n, p in PRIMITIVES.items() if p.public and p.arity == 1)
#: the functions whose value sympy's evalf reaches quickly at any argument: at an argument beyond 1e100 the
#: others take as many digits as the argument is large (sin) or an exponent as long (exp, or erf, sigmoid and
#: softplus through theirs): minutes, so no reference there
_TAME_AT_HUGE_ARGUMENTS = {"abs", "acosh", "asinh", "atan", "cbrt", "log", "log10", "log1p", "log2", "relu",
                           "sign", "sqrt"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outer=st.sampled_from(_UNARY), inner=st.sampled_from(_UNARY + ["inv"]),
       x=st.sampled_from([e for (e,) in extreme_candidates(1)] + [-400.0, 400.0, 1e-160, 1e160]))
def test_extreme_arguments_through_a_composition_never_agree_on_a_wrong_number(outer, inner, x):
    """outer(inner(x)) at extreme x, where the intermediate derivatives may leave float64's range while
    the composite's derivative is an ordinary number (1/(1+exp(-x)) at -400): forward and reverse mode
    may call it ill-conditioned or undefined, never agree on a wrong number (mpmath at 120 digits)."""
    text = f"{outer}(1/x)" if inner == "inv" else f"{outer}({inner}(x))"
    xs = sympy.Symbol("x")
    try:
        middle = 1 / xs if inner == "inv" else PRIMITIVES[inner].sympy(xs)
        if outer not in _TAME_AT_HUGE_ARGUMENTS and abs(middle.evalf(20, subs={xs: sympy.Rational(x)})) > 1e100:
            return
        expr = PRIMITIVES[outer].sympy(middle)
        d = mp_float(sympy.diff(expr, xs), [xs], [x])
    except Exception:  # noqa: BLE001 - no sympy reference for this pair: nothing to compare
        return
    if d is None or not representable(d):
        return
    r = gradcli.grad(text, methods=["forward", "reverse"], x=x)
    if r.status == "agree":
        assert abs(r.gradient["x"] - d) <= 1e-9 * abs(d) + 1e-300, (text, x, r.gradient, d)
