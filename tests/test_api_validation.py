"""The Python API refuses every wrong argument with gradcli.BadInput and one line naming the parameter, and
the command line gives the same line (and exit code 2) for the same mistake: the options are validated
once (``PointOptions.validate``, ``api.prepare``, ``api.direction_vector``) for both."""
from __future__ import annotations

import math

import numpy as np
import pytest

import gradcli
from gradcli.cli import main
from gradcli.testing import assert_gradients
from cli_helpers import PLAIN_ENV, RUNNER, strict_json

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def grad(**kw):
    return lambda: gradcli.grad("x*y", **{"x": 1.0, "y": 2.0, **kw})


def hessian(**kw):
    return lambda: gradcli.hessian("x*y", **{"x": 1.0, "y": 2.0, **kw})


#: (call, words the message must contain: the parameter it names, and what is wrong)
BAD_CALLS = {
    "value-overflow": (grad(x=10 ** 400), ["the value of x", "float64"]),
    "value-str": (grad(x="1.5"), ["the value of x", "real number", "'1.5'"]),
    "value-bool": (grad(x=True), ["the value of x", "real number"]),
    "value-complex": (grad(x=1j), ["the value of x", "real number"]),
    "value-none": (grad(x=None), ["the value of x", "real number"]),
    "value-list": (grad(x=[1.0]), ["the value of x", "real number"]),
    "value-nan": (grad(x=math.nan), ["the value of x", "finite"]),
    "value-inf": (grad(x=-math.inf), ["the value of x", "finite"]),
    "value-missing": (lambda: gradcli.grad("x*y", x=1.0), ["no value for y"]),
    "value-extra": (grad(z=1.0), ["z is not a variable"]),
    "point-int": (lambda: gradcli.grad("x", 5), ["point", "dict"]),
    "point-list": (lambda: gradcli.grad("x", [1.0]), ["point", "dict"]),
    "point-twice": (lambda: gradcli.grad("x", {"x": 1.0}, x=2.0), ["x is given twice"]),
    "expr-int": (lambda: gradcli.grad(5, x=1.0), ["expression", "string"]),
    "expr-none": (lambda: gradcli.grad(None), ["expression", "string"]),
    "methods-unknown-str": (grad(methods="bogus"), ["unknown method 'bogus'"]),
    "methods-unknown": (grad(methods=["forward", "bogus"]), ["unknown method 'bogus'"]),
    "methods-int": (grad(methods=5), ["methods", "5"]),
    "methods-none-item": (grad(methods=[None]), ["methods", "None"]),
    "methods-int-item": (grad(methods=["forward", 3]), ["methods", "3"]),
    "rtol-str": (grad(rtol="a"), ["rtol (--rtol)", "real number"]),
    "rtol-negative": (grad(rtol=-1), ["rtol (--rtol)", "non-negative"]),
    "rtol-inf": (grad(rtol=math.inf), ["rtol (--rtol)", "finite"]),
    "rtol-nan": (grad(rtol=math.nan), ["rtol (--rtol)", "finite"]),
    "rtol-bool": (grad(rtol=True), ["rtol (--rtol)", "real number"]),
    "rtol-list": (grad(rtol=[1e-3]), ["rtol (--rtol)", "real number"]),
    "atol-str": (grad(atol="a"), ["atol (--atol)", "real number"]),
    "atol-negative": (grad(atol=-1e-9), ["atol (--atol)", "non-negative"]),
    "atol-overflow": (grad(atol=10 ** 400), ["atol (--atol)", "float64"]),
    "timeout-negative": (grad(timeout=-1), ["timeout (--timeout)", "from 0"]),
    "timeout-str": (grad(timeout="a"), ["timeout (--timeout)", "real number"]),
    "timeout-inf": (grad(timeout=math.inf), ["timeout (--timeout)", "from 0"]),
    "timeout-nan": (grad(timeout=math.nan), ["timeout (--timeout)", "from 0"]),
    "timeout-bool": (grad(timeout=True), ["timeout (--timeout)", "real number"]),
    "timeout-huge": (grad(timeout=1e7), ["timeout (--timeout)", "1e+06"]),
    "direction-str": (grad(direction="1"), ["direction", "sequence"]),
    "direction-int": (grad(direction=5), ["direction", "sequence"]),
    "direction-none-item": (grad(direction=[None, 1.0]), ["direction", "real number"]),
    "direction-bool-item": (grad(direction=[True, 1.0]), ["direction", "real number"]),
    "direction-str-item": (grad(direction=["1", "0"]), ["direction", "real number"]),
    "direction-inf-item": (grad(direction=[math.inf, 0.0]), ["direction", "finite"]),
    "direction-overflow": (grad(direction=[10 ** 400, 0.0]), ["direction", "float64"]),
    "direction-length": (grad(direction=[1.0]), ["direction", "1 component"]),
    "direction-unknown-name": (grad(direction={"z": 1.0}), ["direction", "z is not a variable"]),
    "direction-int-key": (grad(direction={1: 1.0}), ["direction", "1 is not a variable"]),
    "direction-str-value": (grad(direction={"x": "a"}), ["direction", "real number"]),
    "hessian-value-overflow": (hessian(x=10 ** 400), ["the value of x", "float64"]),
    "hessian-methods-str": (hessian(methods="bogus"), ["unknown method 'bogus'"]),
    "hessian-methods-grad-name": (hessian(methods=["forward"]), ["unknown method 'forward'"]),
    "hessian-rtol-inf": (hessian(rtol=math.inf), ["rtol (--rtol)", "finite"]),
    "hessian-timeout-str": (hessian(timeout="a"), ["timeout (--timeout)", "real number"]),
    "hessian-timeout-negative": (hessian(timeout=-1), ["timeout (--timeout)", "from 0"]),
    "hessian-direction-str": (hessian(direction="1"), ["direction", "sequence"]),
    "hessian-vector": (lambda: gradcli.hessian("x, y", x=1.0, y=2.0), ["scalar expression"]),
    "compile-int": (lambda: gradcli.compile(5), ["expression", "string"]),
    "compile-div-zero": (lambda: gradcli.compile("x/0"), ["divides by a constant that is 0"]),
    "assert-none": (lambda: assert_gradients(None), ["assert_gradients", "None"]),
    "assert-int": (lambda: assert_gradients(5), ["function", "int"]),
}


@pytest.mark.parametrize("call, words", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_a_bad_argument_is_bad_input_naming_it(call, words):
    with pytest.raises(gradcli.BadInput) as info:
        call()
    message = info.value.message
    assert "\n" not in message and message == str(info.value)
    for word in words:
        assert word in message, message


def test_good_arguments_in_every_accepted_form_still_work():
    want = {"x": 2.0, "y": 1.0}
    for kw in ({}, {"methods": "forward,reverse"}, {"methods": ("forward", "reverse")}, {"rtol": 0},
               {"rtol": np.float32(1e-3), "atol": 1}, {"timeout": 0}, {"timeout": None}, {"timeout": np.int64(3)},
               {"x": np.float64(1.0)}, {"x": np.array(1.0)}, {"x": np.int32(1)}, {"direction": (1, 0)},
               {"direction": {"x": np.float64(1.0)}}, {"direction": np.array([1.0, 0.0])}):
        r = gradcli.grad("x*y", **{"x": 1.0, "y": 2.0, **kw})
        assert r.status == "agree" and r.gradient == pytest.approx(want, rel=1e-15), kw
    assert gradcli.grad("rtol*x", point={"rtol": 2.0, "x": 1.0}).gradient == pytest.approx({"rtol": 1.0, "x": 2.0})


#: the same mistakes on the command line: (args, the API call's message must equal the CLI's)
CLI_EQUIVALENTS = {
    "rtol-inf": (["grad", "x*y", "--at", "x=1, y=2", "--rtol", "inf"], grad(rtol=math.inf)),
    "rtol-negative": (["grad", "x*y", "--at", "x=1, y=2", "--rtol", "-1"], grad(rtol=-1.0)),
    "rtol-nan": (["grad", "x*y", "--at", "x=1, y=2", "--rtol", "nan"], grad(rtol=math.nan)),
    "atol-negative": (["grad", "x*y", "--at", "x=1, y=2", "--atol", "-1e-9"], grad(atol=-1e-9)),
    "timeout-negative": (["grad", "x*y", "--at", "x=1, y=2", "--timeout", "-1"], grad(timeout=-1.0)),
    "timeout-inf": (["grad", "x*y", "--at", "x=1, y=2", "--timeout", "inf"], grad(timeout=math.inf)),
    "methods-unknown": (["grad", "x*y", "--at", "x=1, y=2", "-m", "forward,bogus"], grad(methods="forward,bogus")),
    "direction-length": (["grad", "x*y", "--at", "x=1, y=2", "--direction", "1"], grad(direction=[1.0])),
    "direction-name": (["grad", "x*y", "--at", "x=1, y=2", "--direction", "z=1"], grad(direction={"z": 1.0})),
    "hessian-rtol-inf": (["hessian", "x*y", "--at", "x=1, y=2", "--rtol", "inf"], hessian(rtol=math.inf)),
    "hessian-timeout": (["hessian", "x*y", "--at", "x=1, y=2", "--timeout", "2e6"], hessian(timeout=2e6)),
    "hessian-methods": (["hessian", "x*y", "--at", "x=1, y=2", "-m", "forward"], hessian(methods="forward")),
    "explain-timeout": (["explain", "x*y", "--at", "x=1, y=2", "--timeout", "-1"], grad(timeout=-1.0)),
    "missing-value": (["grad", "x*y", "--at", "x=1"], lambda: gradcli.grad("x*y", x=1.0)),
}


@pytest.mark.parametrize("args, call", CLI_EQUIVALENTS.values(), ids=CLI_EQUIVALENTS.keys())
def test_the_cli_gives_the_same_one_line_message_and_exit_2(args, call):
    with pytest.raises(gradcli.BadInput) as info:
        call()
    r = RUNNER.invoke(main, args, env=PLAIN_ENV)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [f"error: {info.value.message}"]
    j = RUNNER.invoke(main, args + ["--json"], env=PLAIN_ENV)
    assert j.exit_code == 2 and strict_json(j.stdout) == {"status": "error", "error": info.value.message}


@pytest.mark.parametrize("kwargs, named", [
    ({"domain": 5}, "domain"), ({"domain": {"x": (0, 1)}, "rtol": float("inf")}, "rtol"),
    ({"domain": {"x": (0, 1)}, "seed": -1}, "seed"), ({"domain": {"x": (0, 1)}, "timeout": -1}, "timeout"),
])
def test_batch_options_follow_the_point_rules(kwargs, named):
    with pytest.raises(gradcli.BadInput, match=named):
        gradcli.grad_batch("x", n=10, **kwargs)


def test_a_batch_option_given_empty_at_a_point_is_refused_not_ignored():
    from click.testing import CliRunner

    from gradcli.cli import main
    r = CliRunner().invoke(main, ["grad", "x", "--at", "x=1", "--out", ""])
    assert r.exit_code == 2 and "--out only applies in batch mode" in r.stderr
