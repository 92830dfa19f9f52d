"""The rough edges a new user meets first: expressions that start with '-', stop signals in every command,
a project's own tests beside its models, malformed -k, failure numbers that reconcile, a misspelt method,
the command list, a bare ``gradcli``, the Python API's per-variable errors and assert_gradients' traceback."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap

import click
import numpy as np
import pytest

import gradcli
from cli_helpers import LINE, PLAIN_ENV, RUNNER, check, finish, model, start, strict_json
from gradcli.checks import session
from gradcli.checks.collect import find_files
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.cli import load_command, main
from gradcli.core.errors import BadInput


def cli(*args, env=None):
    return RUNNER.invoke(main, [str(a) for a in args], env={**PLAIN_ENV, **(env or {})}, catch_exceptions=False,
                         prog_name="gradcli")


# --- an expression that starts with '-' -------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["-x**2", "--at", "x=3"],
    ["--", "-x**2", "--at", "x=3"],
    ["--at", "x=3", "--", "-x**2"],
    ["--at", "x=3", "-x**2"],
])
def test_an_expression_starting_with_minus_is_the_expression_wherever_it_stands(args):
    r = cli("grad", *args, "--json")
    assert r.exit_code == 0, r.output
    doc = strict_json(r.stdout)
    assert doc["expression"] == "-x**2" and doc["value"] == -9.0
    assert doc["methods"]["forward"]["gradient"]["x"] == -6.0  # d/dx -x^2 = -2x


def test_every_expression_command_takes_a_leading_minus():
    h = strict_json(cli("hessian", "--", "-x**2*y", "--at", "x=1, y=2", "--json").stdout)
    assert h["methods"]["forward_over_reverse"]["hessian"] == [[-4.0, -2.0], [-2.0, 0.0]]  # [[-2y, -2x], [-2x, 0]]
    e = cli("explain", "-x**2", "--at", "x=3", "--json")
    assert e.exit_code == 0 and strict_json(e.stdout)["expression"] == "-x**2"
    p = strict_json(cli("plot", "-x**2", "--x", "-1:1", "--points", "3", "--json").stdout)
    assert p["expression"] == "-x**2" and p["status"] == "ok"
    s = cli("steps", "-x**3", "--at", "x=2", "--json")
    assert s.exit_code == 0 and strict_json(s.stdout)["reference"] == pytest.approx(-12.0)  # -3x^2


@pytest.mark.parametrize("args, token", [(["--x**2", "--at", "x=1"], "--x**2"),
                                         (["--m*x", "--at", "m=2", "--at", "x=1"], "--m*x")])
def test_an_expression_read_as_an_option_gets_a_hint_that_works(args, token):
    r = cli("grad", *args)
    assert r.exit_code == 2 and r.stdout == ""
    assert f"If {token} is the expression, put it after --: gradcli grad -- '{token}'" in r.stderr
    rest = [a for a in args if a != token]
    fixed = cli("grad", "--", token, *rest, "--json")
    assert fixed.exit_code == 0, fixed.output
    assert strict_json(fixed.stdout)["expression"] == token


def test_an_expression_that_starts_like_a_short_option_is_the_expression():
    # -m is --method, but no method list holds an operator: -m*x is the expression
    r = cli("grad", "-m*x", "--at", "m=2", "--at", "x=3", "--json")
    assert r.exit_code == 0, r.output
    assert strict_json(r.stdout)["expression"] == "-m*x"
    assert strict_json(cli("grad", "x**2", "-mforward", "--at", "x=3", "--json").stdout)["methods"].keys() == {
        "forward"}


def test_an_unknown_option_that_is_no_expression_gets_no_hint():
    r = cli("grad", "x", "--at", "x=1", "--bogus")
    assert r.exit_code == 2 and "No such option '--bogus'" in r.stderr and "expression" not in r.stderr


# --- stop signals ------------------------------------------------------------------------------------------

STATUS = {"SIGINT": 130, "SIGTERM": 143}
GOOD = '''
import gradcli

@gradcli.check(inputs={"x": 1.5})
def square(x):
    return x ** 2
'''


def stopped(tmp_path, sig, hook, *args):
    return finish(start(args, tmp_path, sig, hook), timeout=300)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_checks_report_is_written_still_sets_the_exit_status(tmp_path, sig):
    # the report is written whole (the signal is deferred there), and the status still says it was stopped
    (tmp_path / "m.py").write_text(GOOD)
    code, out, err = stopped(tmp_path, sig, "gradcli.render.junit:junit_xml", "check", "m.py", "--json",
                             "--junit", "j.xml")
    assert code == STATUS[sig]
    assert strict_json(out)["checks"][0]["status"] == "pass"
    assert err.splitlines()[-1] == LINE[sig]
    assert sorted(os.listdir(tmp_path)) == ["j.xml", "m.py"]  # the JUnit file complete, no temporary


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("sig, args, hook", [
    ("SIGTERM", ["steps", "exp(x)", "--at", "x=1", "--json"], "gradcli.plotting.data:step_data"),
    ("SIGINT", ["steps", "exp(x)", "--at", "x=1", "--json"], "sympy:diff"),
])
def test_steps_ends_on_a_signal_like_every_command(tmp_path, sig, args, hook):
    code, out, err = stopped(tmp_path, sig, hook, *args)
    assert (code, err.splitlines()) == (STATUS[sig], [LINE[sig]])
    assert strict_json(out) == {"status": "error", "error": LINE[sig], "interrupted": True}  # --json's one document
    assert os.listdir(tmp_path) == []


# --- a project's tests are not model files ------------------------------------------------------------------

def _project(tmp_path):
    model(tmp_path / "net.py", GOOD)
    (tmp_path / "tests").mkdir()
    for name in ("test_net.py", "net_test.py", "conftest.py"):
        # what a project's tests do: import gradcli, and things gradcli check's process does not have
        (tmp_path / "tests" / name).write_text("import gradcli\nimport no_such_package_for_gradcli\n")
    return tmp_path


def test_a_folder_walk_leaves_what_pytest_collects_alone(tmp_path):
    root = _project(tmp_path)
    files, errors = find_files([root])
    assert [os.path.basename(f) for f in files] == ["net.py"] and errors == []
    r = check(".", "--json", cwd=root)
    assert r.exit_code == 0, r.output
    assert [c["name"] for c in strict_json(r.stdout)["checks"]] == ["square"]


def test_a_test_file_named_on_the_command_line_is_imported(tmp_path):
    root = _project(tmp_path)
    files, _ = find_files([root / "tests" / "test_net.py"])
    assert files == [str(root / "tests" / "test_net.py")]
    r = check(os.path.join("tests", "test_net.py"), cwd=root)
    assert r.exit_code == 2 and "no_such_package_for_gradcli" in r.stderr


def test_a_folder_of_tests_alone_says_why_nothing_was_found(tmp_path):
    root = _project(tmp_path)
    r = check("tests", cwd=root)
    assert r.exit_code == 2
    assert "2 test files (test_*.py, *_test.py, conftest.py) left alone" in r.stderr  # conftest is never a model


# --- -k ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["mlp or", "mlp and (", "(mlp", "not"])
def test_a_malformed_k_is_refused_by_every_entry_point(tmp_path, pattern):
    model(tmp_path / "m.py", GOOD)
    with pytest.raises(BadInput, match="expected"):
        session.collect([tmp_path / "m.py"], pattern)
    r = check(tmp_path / "m.py", "-k", pattern)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: -k {pattern!r}: at column ")


# --- failure numbers that reconcile ---------------------------------------------------------------------------

def _check(fn, **kw):
    spec = build_spec(fn, **kw)
    spec.file, spec.line = __file__, 1
    return run_check(spec, {})


def test_the_largest_relative_error_is_located_when_it_is_not_the_worst_entry():
    x = np.array([1e-12, 2.0, 3.0])

    def grad(x):
        g = 2 * x
        g[0], g[2] = 4e-12, 9.0  # 1e-12 off where |g| is tiny (rel 1, within atol); 3 off at x[2] (rel 0.5)
        return g

    r = _check(lambda x: np.sum(x ** 2), grad=grad, inputs={"x": x}, atol=1e-9)
    assert r.status == "fail"
    worst = r.mismatches[0]
    assert (worst.index, worst.expected, worst.got) == ((2,), pytest.approx(6.0), 9.0)
    assert "at x[2]: expected 6, got 9 (rel error 0.5)" in r.message
    assert r.max_rel_error == pytest.approx(abs(4e-12 - 2e-12) / 2e-12, rel=1e-6)  # x[0]'s, not x[2]'s
    assert "the largest relative error, 1 at x[0], is within its tolerance" in r.message
    assert "1 of 3 entries wrong (input elements)" in r.message


def test_when_the_worst_entry_has_the_largest_error_nothing_more_is_said():
    r = _check(lambda x: np.sum(x ** 2), grad=lambda x: 3 * x, inputs={"x": np.array([1.0, 2.0])})
    assert r.status == "fail" and r.max_rel_error == pytest.approx(0.5)
    assert "largest relative error" not in r.message


def test_counts_say_whether_they_count_elements_or_jacobian_entries():
    def vjp(v, x, y):
        return v @ y * 1.01, v.T @ x  # x's part 1 % off in every entry

    full = _check(lambda x, y: np.outer(x, y), vjp=vjp, inputs={"x": (3,), "y": (4,)}, mode="full")
    # the Jacobian of outer(x, y) has 12 outputs × 7 inputs; x's 12 × 3 block is nonzero, each entry wrong
    assert "12 of 84 entries wrong (Jacobian entries: output element × input element; x: 12 of 36)" in full.message
    fast = _check(lambda x, y: np.outer(x, y), vjp=vjp, inputs={"x": (3,), "y": (4,)}, mode="fast")
    assert "3 of 7 entries wrong (input elements; x: 3 of 3)" in fast.message


def test_order_2_rows_say_which_direction_they_belong_to():
    def hvp(v, x):
        return 1.3 * 6 * x * v  # the Hessian of sum(x^3) is diag(6x): 30 % too large

    r = _check(lambda x: np.sum(x ** 3), hvp=hvp, inputs={"x": (4,)})
    assert r.status == "fail"
    ks = {m.direction for m in r.mismatches}
    assert None not in ks and len(ks) > 1 and "4 random directions × 4 input elements" in r.message
    assert f"(random direction {r.mismatches[0].direction})" in r.message
    pairs = [(m.direction, m.index) for m in r.mismatches]
    assert len(set(pairs)) == len(pairs)  # an element repeats only along another direction
    for m in r.mismatches:
        assert m.got / m.expected == pytest.approx(1.3, rel=1e-4)
    from gradcli.render.check import result_text

    text = result_text(r).splitlines()
    header = next(i for i, line in enumerate(text) if line.split()[:3] == ["input", "index", "direction"])
    first = text[header + 1].split()
    assert first[0] == "x" and first[2] == str(r.mismatches[0].direction)
    assert [d["direction"] for d in r.to_dict()["mismatches"]] == [m.direction for m in r.mismatches]


# --- small ones ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, wrong, meant", [("grad", "frward", "forward"), ("grad", "centrl", "central"),
                                                   ("hessian", "symbolc", "symbolic")])
def test_a_misspelt_method_gets_a_suggestion(command, wrong, meant):
    r = cli(command, "x**2", "--at", "x=1", "--method", wrong)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: unknown method {wrong!r} (did you mean {meant}?); choose from ")
    with pytest.raises(BadInput, match=re.escape(f"(did you mean {meant}?)")):
        (gradcli.grad if command == "grad" else gradcli.hessian)("x**2", x=1.0, methods=wrong)


def test_a_method_like_nothing_gets_no_suggestion():
    r = cli("grad", "x", "--at", "x=1", "--method", "backward")
    assert r.exit_code == 2 and "did you mean" not in r.stderr


def _commands(columns: int) -> list:
    """The command list as a terminal ``columns`` wide shows it (click's formatter leaves 2 of them)."""
    formatter = click.HelpFormatter(width=columns - 2)
    main.format_commands(click.Context(main), formatter)
    return formatter.getvalue().split("Commands:\n")[1].splitlines()


def test_the_command_list_fits_80_columns_with_whole_sentences():
    rows = _commands(80)
    assert len(rows) == 6
    for row in rows:
        assert len(row) <= 80 and row.endswith(".") and not row.endswith("..."), row


@pytest.mark.parametrize("columns", [52, 64, 72])
def test_a_narrow_command_list_cuts_between_phrases(columns):
    rows = _commands(columns)
    assert any(row.endswith("...") for row in rows)
    for row in rows:
        assert len(row) <= columns, row
        name, text = row.split(None, 1)
        sentence = click.Command(name, help=load_command(name).help).get_short_help_str(1000)
        if text.endswith("..."):
            cut = text[:-3]
            assert sentence.startswith(cut) and sentence[len(cut)] in " ,:;", (cut, sentence)
            # between words only where no phrase ends early enough to cut there
            assert sentence[len(cut)] != " " or not re.search(r"[,:;] ", cut), (cut, sentence)
        else:
            assert text == sentence


def test_bare_gradcli_shows_the_help_and_succeeds():
    r = cli()
    assert r.exit_code == 0
    assert r.stdout == cli("--help").stdout and "Commands:" in r.stdout


def test_the_python_api_has_errors_by_variable_as_the_json_does():
    r = gradcli.grad("x**2*sin(y)", x=1.5, y=0.3)
    exact = {"x": 2 * 1.5 * np.sin(0.3), "y": 1.5 ** 2 * np.cos(0.3)}
    doc = r.to_dict()
    for name in ("central", "richardson", "forward"):
        m = r.methods[name]
        assert set(m.rel_error) == {"x", "y"} and m.rel_error == doc["methods"][name]["rel_error"]
        for v in "xy":
            assert m.gradient[v] == doc["methods"][name]["gradient"][v]
            assert m.rel_error[v] == pytest.approx(abs(m.gradient[v] - exact[v]) / abs(exact[v]), rel=1e-3, abs=1e-15)
        assert m.rel_error.max() == m.max_rel_error
    assert r.methods["central"].jacobian.shape == (1, 2)  # the matrix is still there
    vec = gradcli.grad("x*y, x+y", x=1.0, y=2.0)
    jacobian = [[2.0, 1.0], [1.0, 1.0]]  # [[y, x], [1, 1]]
    assert vec.methods["forward"].gradient == jacobian == vec.to_dict()["methods"]["forward"]["jacobian"]


FAILING_TESTS = '''
import numpy as np
from gradcli.testing import assert_gradients

def test_wrong_gradient():
    assert_gradients(lambda x: np.sum(x ** 2), grad=lambda x: 3 * x, x=np.array([1.0, 2.0]))

def test_bad_option():
    assert_gradients(lambda x: np.sum(x ** 2), grad=lambda x: 2 * x, x=np.array([1.0, 2.0]), rtol=-1)
'''


@pytest.mark.parametrize("tb", ["auto", "native"])
def test_assert_gradients_failures_show_the_test_not_gradcli(tmp_path, tb):
    (tmp_path / "test_model.py").write_text(textwrap.dedent(FAILING_TESTS))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--tb={tb}",
                        "test_model.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "2 failed" in p.stdout, p.stdout
    for line in (6, 9):  # the test's own line fails
        assert re.search(rf'test_model\.py(:|", line ){line}\b', p.stdout), p.stdout
    assert "During handling" not in p.stdout and "direct cause" not in p.stdout
    frames = re.findall(r"gradcli[/\\](?!testing\.py)[\w/\\]+\.py", p.stdout)
    assert frames == [], frames  # none of gradcli's machinery below assert_gradients
    if tb != "native":
        assert "testing.py" not in p.stdout


def test_order_2_from_the_command_line_applies_where_a_check_does_not_set_it(tmp_path):
    from cli_helpers import EXAMPLES, check, strict_json

    (tmp_path / "two.py").write_text("import numpy as np, gradcli\n\n"
                                     "@gradcli.check(x=(3,))\ndef cubes(x):\n    return np.sum(x ** 3)\n\n"
                                     "@gradcli.check(x=(3,), order=1)\ndef squares(x):\n    return np.sum(x ** 2)\n")
    doc = strict_json(check(tmp_path / "two.py", "--order", "2", "--json").stdout)
    assert {c["name"]: c.get("order", 1) for c in doc["checks"]} == {"cubes": 2, "squares": 1}
    assert all(c["status"] == "pass" for c in doc["checks"])
    assert "second_order" in next(c for c in doc["checks"] if c["name"] == "cubes")
    assert check(os.path.join(EXAMPLES, "mlp.py"), "--order", "3").exit_code == 2


def test_the_json_error_document_carries_the_expression_hint_too():
    r = cli("grad", "--x**2", "--at", "x=1", "--json")
    assert r.exit_code == 2
    doc = strict_json(r.stdout)
    assert doc["status"] == "error" and "put it after --: gradcli grad -- '--x**2'" in doc["error"]


# --- gradcli check with no PATH, a misspelt [tool.gradcli] key ------------------------------------------

def test_check_without_a_path_checks_the_current_folder(tmp_path):
    model(tmp_path / "m.py", """
        import numpy as np
        import gradcli

        @gradcli.check(x=(3,))
        def squares(x):
            return np.sum(x ** 2)
        """)
    r = check("--json", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert [(c["name"], c["status"]) for c in strict_json(r.stdout)["checks"]] == [("squares", "pass")]
    dot = strict_json(check(".", "--json", cwd=tmp_path).stdout)
    assert strict_json(r.stdout)["checks"][0]["file"] == dot["checks"][0]["file"]


def test_check_without_a_path_in_a_folder_without_models_says_so(tmp_path):
    r = check(cwd=tmp_path)
    assert r.exit_code == 2 and "no model files" in r.stderr and "Missing argument" not in r.stderr


@pytest.mark.parametrize("key, meant", [("wrtt", "wrt"), ("rtoll", "rtol"), ("time-out", "timeout"),
                                        ("Seed", "seed")])
def test_a_misspelt_tool_gradcli_key_gets_the_closest_one(tmp_path, key, meant):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradcli]\n{key} = 1\n")
    with pytest.raises(ValueError) as err:
        session.load_defaults(tmp_path)
    assert f"unknown key {key!r} in [tool.gradcli]; did you mean {meant!r}? (known: " in str(err.value)
    model(tmp_path / "m.py", "import gradcli\n")
    r = check(tmp_path / "m.py")
    assert r.exit_code == 2 and f"did you mean {meant!r}?" in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_tool_gradcli_key_with_nothing_close_gets_the_list_only(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nzzzzzz = 1\n")
    with pytest.raises(ValueError, match=re.escape("unknown key 'zzzzzz' in [tool.gradcli] (known: ")):
        session.load_defaults(tmp_path)
