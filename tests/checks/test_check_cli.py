"""``gradcli check`` through CliRunner: exit codes, the table, --json, --junit, -k, folders, errors.

The first part runs the command over a stand-in runner (so that every status, inconclusive and
nondifferentiable included, can be produced on demand, and the command's own logic is tested on its
own); the second part runs real model files end to end with ``gradcli.check`` and the real runner.
stdout and stderr are asserted separately.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import textwrap
import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from rich.console import Console

from gradcli.checks.result import CheckResult, MethodSummary, Mismatch
from gradcli.cli import main
from cli_helpers import RUNNER, check


CHECK_KEYS = {"name", "file", "line", "kind", "status", "methods", "mismatches", "message"}
MISMATCH_KEYS = {"input", "index", "expected", "got", "abs_error", "rel_error"}
SUMMARY_KEYS = {"passed", "failed", "errors", "skipped"}


def json_doc(result) -> dict:
    doc = json.loads(result.stdout)  # exactly one document: json.loads rejects anything after it
    assert set(doc) <= {"checks", "summary", "errors"}
    assert SUMMARY_KEYS <= set(doc["summary"])
    for c in doc["checks"]:
        assert CHECK_KEYS <= set(c)
        for m in c["mismatches"]:
            assert MISMATCH_KEYS <= set(m)
    return doc


# --- a stand-in runner: the status comes from the spec's options ----------------------------------------

def fake_model(path, **checks):
    """A model file registering one check per keyword; the value is the status the stand-in reports."""
    lines = ["import gradcli", "from gradcli.checks.spec import CheckSpec, REGISTRY"]
    for name, status in checks.items():
        lines += [f"def {name}(x):", f"    return {str(path)!r}",
                  f"REGISTRY.append(CheckSpec(name={name!r}, fn={name}, file=__file__, line={len(lines) + 1}, "
                  f"inputs={{'x': (3,)}}, options={{'status': {status!r}}}))"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def fake(monkeypatch, tmp_path_factory):
    """Install stand-ins for gradcli.checks.runner and .config; returns the calls they saw."""
    calls = {"defaults": tmp_path_factory.mktemp("calls") / "defaults.jsonl", "config": {}, "paths": []}

    def run_check(spec, defaults):
        # gradcli check runs the checks in a model process: what they saw comes back through a file
        with open(calls["defaults"], "a") as fh:
            fh.write(json.dumps(defaults) + "\n")
        status = spec.options["status"]
        if status == "crash":
            raise RuntimeError("bug in the runner")
        r = CheckResult(name="whatever", file="whatever", line=spec.line, kind=spec.kind, status=status,
                        message=f"{status} from {spec.fn(0)}", reference="richardson",
                        max_abs_error=1e-3 if status == "fail" else 1e-12,
                        max_rel_error=1e-2 if status == "fail" else 1e-12)
        r.methods["hand_written"] = MethodSummary("hand_written", "mismatch" if status == "fail" else "ok", 1e-3, 1e-2)
        if status == "fail":
            r.mismatches = [Mismatch("x", (1,), 2.0, 2.02, 0.02, 0.01)]
        if status == "error":
            r.traceback = '  File "model.py", line 3, in f\n    return 1 / 0\nZeroDivisionError: division by zero\n'
        return r

    def load_defaults(path):
        calls["paths"].append(path)
        return dict(calls["config"])

    from gradcli.checks import session

    monkeypatch.setattr(session, "run_check", run_check)
    monkeypatch.setattr(session.config, "load_defaults", load_defaults)
    return calls


def defaults_seen(calls) -> list:
    """The defaults each stand-in check was run with, in order."""
    return [json.loads(line) for line in calls["defaults"].read_text().splitlines()]


def test_all_pass_exit_0(tmp_path, fake):
    f = fake_model(tmp_path / "m.py", loss="pass", layer="pass")
    r = check(f)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.stderr == ""
    assert "loss" in r.stdout and "layer" in r.stdout and "PASS" in r.stdout
    assert "2 passed in" in r.stdout


def test_a_failure_exit_1_with_the_mismatch(tmp_path, fake):
    f = fake_model(tmp_path / "m.py", good="pass", bad="fail")
    r = check(f)
    assert r.exit_code == 1
    assert r.stderr == ""
    assert "FAIL" in r.stdout and "1 passed, 1 failed" in r.stdout
    assert "[1]" in r.stdout and "2.02" in r.stdout  # input x, index, expected, got


@pytest.mark.parametrize("statuses, code", [
    (("pass", "nondifferentiable"), 3), (("undefined",), 3), (("nondifferentiable", "fail"), 1),
    (("inconclusive",), 1), (("error", "pass"), 1), (("skipped", "pass"), 0), (("undefined", "inconclusive"), 1),
])
def test_exit_codes(tmp_path, fake, statuses, code):
    f = fake_model(tmp_path / "m.py", **{f"c{i}": s for i, s in enumerate(statuses)})
    r = check(f)
    assert r.exit_code == code, r.stdout
    assert json_doc(check(f, "--json"))["summary"]["passed"] == statuses.count("pass")


def test_an_error_shows_the_users_traceback(tmp_path, fake):
    r = check(fake_model(tmp_path / "m.py", boom="error", fine="pass"))
    assert r.exit_code == 1
    assert "ZeroDivisionError" in r.stdout and "return 1 / 0" in r.stdout
    assert "1 passed, 1 error" in r.stdout


def test_a_crashing_runner_is_an_error_for_that_check_only(tmp_path, fake):
    r = check(fake_model(tmp_path / "m.py", a="crash", b="pass"), "--json")
    doc = json_doc(r)
    assert r.exit_code == 1
    assert [c["status"] for c in doc["checks"]] == ["error", "pass"]
    assert "internal error in gradcli" in doc["checks"][0]["message"]


def test_json_is_one_document_with_the_design_keys(tmp_path, fake):
    f = fake_model(tmp_path / "m.py", good="pass", bad="fail")
    f.write_text("print('chatty model file')\n" + f.read_text())
    r = check(f, "--json")
    doc = json_doc(r)
    assert r.exit_code == 1
    assert [c["name"] for c in doc["checks"]] == ["good", "bad"]
    assert doc["summary"]["passed"] == 1 and doc["summary"]["failed"] == 1
    bad = doc["checks"][1]
    assert bad["mismatches"][0] == {"input": "x", "index": [1], "expected": 2.0, "got": 2.02,
                                    "abs_error": 0.02, "rel_error": 0.01}
    assert bad["file"].endswith("m.py") and bad["line"] > 0 and bad["kind"] == "autodiff"
    assert "chatty model file" in r.stderr  # the model's prints never reach the JSON on stdout


def test_json_is_not_mixed_with_a_progress_bar(tmp_path, fake, monkeypatch):
    cli_check = importlib.import_module("gradcli.cli.check")  # gradcli.cli.check is also the command

    monkeypatch.setattr(cli_check, "PROGRESS_AFTER_S", -1.0)
    r = check(fake_model(tmp_path / "m.py", a="pass", b="pass", c="pass"), "--json")
    json_doc(r)
    assert r.stderr == ""


def test_progress_bar_appears_once_a_run_is_slow(tmp_path, fake, monkeypatch):
    cli_check = importlib.import_module("gradcli.cli.check")  # gradcli.cli.check is also the command
    from gradcli.checks.collect import collect

    specs, _ = collect([fake_model(tmp_path / "m.py", a="pass", b="pass")])
    buf = StringIO()
    monkeypatch.setattr(cli_check, "PROGRESS_AFTER_S", -1.0)
    cli_check.run_all(specs, {}, Console(file=buf, force_terminal=True, width=100))
    assert "checking" in buf.getvalue()
    buf = StringIO()
    monkeypatch.setattr(cli_check, "PROGRESS_AFTER_S", 60.0)
    cli_check.run_all(specs, {}, Console(file=buf, force_terminal=True, width=100))
    assert buf.getvalue() == ""


def test_a_folders_progress_bar_counts_files_and_error_lines_clear_it(tmp_path, fake, monkeypatch):
    cli_check = importlib.import_module("gradcli.cli.check")  # gradcli.cli.check is also the command

    fake_model(tmp_path / "a.py", a1="pass", a2="pass", a3="pass")
    (tmp_path / "b.py").write_text("import gradcli\nraise ImportError('no module named torch here')\n")
    fake_model(tmp_path / "c.py", c1="pass", c2="pass", c3="pass", c4="pass", c5="pass")
    buf = StringIO()
    monkeypatch.setattr(cli_check, "PROGRESS_AFTER_S", -1.0)
    report = cli_check.run_files_report([str(tmp_path)], None, {}, 60.0,
                                        Console(file=buf, force_terminal=True, width=100))
    assert len(report.checks) == 8 and len(report.errors) == 1
    text = buf.getvalue()
    # the import error came while the bar was shown: on a line of its own, never after the bar's text
    assert "error: " in text and "no module named torch here" in text
    assert not re.search(r"checking[^\r\n]*error:", text), text
    assert text.count("error: ") == 1
    # the total is the number of model files from the first frame to the last (was checks: 3, then 8)
    totals = set(re.findall(r"\d+/(\d+) files", text))
    assert totals == {"3"}, text


def test_junit_is_valid_xml_written_atomically(tmp_path, fake):
    f = fake_model(tmp_path / "models" / "m.py", good="pass", bad="fail", boom="error", kink="nondifferentiable")
    out = tmp_path / "report.xml"
    out.write_text("old content")
    r = check(f, "--junit", out)
    assert r.exit_code == 1
    root = ET.parse(out).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"good", "bad", "boom", "kink"}
    # the failure text is the table's (input x, index [1]: the worst element)
    assert cases["bad"].find("failure") is not None and re.search(r"\n  x +\[1\] ", cases["bad"].find("failure").text)
    assert cases["boom"].find("error") is not None and "ZeroDivisionError" in cases["boom"].find("error").text
    assert cases["kink"].find("skipped") is not None
    assert len(list(cases["good"])) == 0
    assert cases["good"].get("classname").endswith("models.m")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("4", "1", "1", "1")
    assert sorted(os.listdir(tmp_path)) == ["models", "report.xml"]  # no temporary file left behind


def test_junit_and_json_together(tmp_path, fake):
    out = tmp_path / "r.xml"
    r = check(fake_model(tmp_path / "m.py", a="pass"), "--json", "--junit", out)
    assert r.exit_code == 0 and json_doc(r)["summary"]["passed"] == 1
    ET.parse(out)


def test_junit_records_files_that_cannot_be_imported(tmp_path, fake):
    fake_model(tmp_path / "ok.py", a="pass")
    (tmp_path / "broken.py").write_text("import gradcli\nraise ImportError('nope')\n")
    out = tmp_path / "r.xml"
    r = check(tmp_path / "ok.py", tmp_path / "broken.py", "--junit", out)
    assert r.exit_code == 2
    names = [(c.get("name"), c.find("error") is not None) for c in ET.parse(out).getroot().iter("testcase")]
    assert (names[0][0].endswith("broken.py"), names[0][1]) == (True, True) and names[1] == ("a", False)


@pytest.mark.parametrize("target", ["missing_dir/r.xml", "."])
def test_junit_to_a_bad_place_is_exit_2(tmp_path, fake, target):
    r = check(fake_model(tmp_path / "m.py", a="pass"), "--junit", tmp_path / target)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --junit") and len(r.stderr.splitlines()) == 1


def test_k_selects_by_name(tmp_path, fake):
    f = fake_model(tmp_path / "m.py", mlp_loss="pass", mlp_bias="fail", attention="fail")
    r = check(f, "-k", "mlp and not bias", "--json")
    assert [c["name"] for c in json_doc(r)["checks"]] == ["mlp_loss"] and r.exit_code == 0
    r = check(f, "-k", "ATTENTION")
    assert r.exit_code == 1 and "1 failed" in r.stdout


def test_k_matching_nothing_is_exit_2(tmp_path, fake):
    f = fake_model(tmp_path / "m.py", loss="pass")
    r = check(f, "-k", "nothing_like_it")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == "error: no check matches -k 'nothing_like_it'\n"
    r = check(f, "-k", "nothing_like_it", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["status"] == "error"


def test_a_folder_with_two_files_defining_the_same_name(tmp_path, fake):
    fake_model(tmp_path / "models" / "a" / "net.py", loss="pass")
    fake_model(tmp_path / "models" / "b" / "net.py", loss="pass")
    r = check("models", "--json", cwd=tmp_path)
    doc = json_doc(r)
    assert r.exit_code == 0
    names = [c["name"] for c in doc["checks"]]
    assert names == [os.path.join("models", "a", "net.py") + "::loss", os.path.join("models", "b", "net.py") + "::loss"]
    # each check ran its own file's function
    assert [c["message"].endswith(os.path.join(d, "net.py")) for c, d in zip(doc["checks"], "ab")] == [True, True]
    assert [c["file"] for c in doc["checks"]] == [os.path.join("models", d, "net.py") for d in "ab"]


def test_an_import_error_is_exit_2_one_line_no_traceback(tmp_path, fake):
    f = tmp_path / "broken.py"
    f.write_text("import gradcli\nimport numpy as np\nW = np.zeros((3, 4)) @ np.zeros((3, 4))\n")
    r = check(f)
    assert r.exit_code == 2
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr + r.stdout
    assert r.stderr.startswith("error: ") and "broken.py" in r.stderr and "ValueError" in r.stderr
    assert "line 3" in r.stderr and "np.zeros((3, 4)) @" in r.stderr
    assert "1 file error" in r.stdout


def test_an_import_error_does_not_stop_the_other_files(tmp_path, fake):
    fake_model(tmp_path / "a.py", fine="pass")
    (tmp_path / "b.py").write_text("import gradcli\ndef f(:\n")
    r = check(tmp_path, "--json")
    doc = json_doc(r)
    assert r.exit_code == 2
    assert [c["name"] for c in doc["checks"]] == ["fine"]
    assert doc["errors"][0]["file"].endswith("b.py") and "SyntaxError" in doc["errors"][0]["message"]
    assert len(r.stderr.splitlines()) == 1


def test_a_model_needing_a_framework_that_is_not_installed_is_one_line_and_the_others_run(tmp_path, fake):
    # what `import torch` raises where torch is not installed (it is installed here)
    (tmp_path / "a_torch.py").write_text(
        "import gradcli\nraise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    fake_model(tmp_path / "b.py", good="pass")
    r = check(tmp_path)
    assert r.exit_code == 2 and "PASS" in r.stdout and "good" in r.stdout
    assert r.stderr.splitlines() == [
        f"error: {tmp_path / 'a_torch.py'}: cannot import: torch is not installed; this file needs it: "
        "pip install 'gradcli[torch]'"]


def test_a_file_that_registers_nothing_is_exit_2(tmp_path, fake):
    f = tmp_path / "empty.py"
    f.write_text("import gradcli\n")
    r = check(f)
    assert r.exit_code == 2 and "registers no checks" in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["missing.py"], "missing.py: no such file or directory"),
    (["{model}", "--rtol", "-1"], "--rtol must be a finite, non-negative number, got -1.0"),
])
def test_bad_input_is_exit_2_one_line(tmp_path, fake, args, message):
    f = fake_model(tmp_path / "m.py", a="pass")
    args = [a.replace("{model}", str(f)) for a in args]
    r = check(*args, cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == f"error: {message}" + r.stderr[len(f"error: {message}"):] and len(r.stderr.splitlines()) == 1
    r = check(*args, "--json", cwd=tmp_path)
    assert r.exit_code == 2 and json.loads(r.stdout)["status"] == "error"


# (no PATH is no usage error: it checks the current folder, tests/test_rough_edges.py)
@pytest.mark.parametrize("args", [["--mode", "slow"], ["--seed", "x"], ["--rtol"]])
def test_usage_errors_are_exit_2_and_honour_json(tmp_path, fake, args):
    f = fake_model(tmp_path / "m.py", a="pass")
    args = [*args, str(f)] if args != ["--rtol"] else [str(f), *args]
    r = check(*args, "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["status"] == "error"


def test_options_override_the_projects_defaults(tmp_path, fake):
    fake["config"].update({"rtol": 1e-3, "mode": "fast", "seed": 7})
    f = fake_model(tmp_path / "m.py", a="pass")
    assert check(f, "--rtol", "1e-6", "--seed", "3").exit_code == 0
    assert defaults_seen(fake)[-1] == {"rtol": 1e-6, "mode": "fast", "seed": 3}
    assert fake["paths"][-1] == str(f)
    check(f, "--mode", "full", "--atol", "0")
    assert defaults_seen(fake)[-1] == {"rtol": 1e-3, "mode": "full", "seed": 7, "atol": 0.0}


def test_help(tmp_path, fake):
    r = RUNNER.invoke(main, ["check", "--help"])
    assert r.exit_code == 0 and "-k PATTERN" in r.stdout and "Exit codes" in r.stdout
    r = RUNNER.invoke(main, ["--help"])
    assert "gradcli check" in r.stdout


# --- end to end: gradcli.check and the real runner -----------------------------------------------------

E2E_MODEL = textwrap.dedent('''
    import numpy as np
    import gradcli


    @gradcli.check(x=(3,), w=(3,))
    def good(x, w):
        return np.sum(np.tanh(x * w))


    @good.grad
    def good_grad(x, w):
        d = 1 - np.tanh(x * w) ** 2
        return d * w, d * x


    @gradcli.check(x=(4,))
    def bad(x):
        return np.sum(x ** 3)


    @bad.grad
    def bad_grad(x):
        return 3 * x  # should be 3 * x ** 2


    def helper(x):
        return np.tanh(x)[5]  # IndexError: the user's own bug


    @gradcli.check(x=(2,))
    def raises(x):
        return helper(x)


    @gradcli.check(x=(2, 3))
    def layer(x):
        return np.tanh(x)


    @layer.vjp
    def layer_vjp(g, x):
        return g * (1 - np.tanh(x) ** 2)
''')


def test_end_to_end(tmp_path):
    f = tmp_path / "model.py"
    f.write_text(E2E_MODEL)
    r = check(f, "--json")
    doc = json_doc(r)
    assert r.exit_code == 1, r.stdout + r.stderr
    status = {c["name"]: c for c in doc["checks"]}
    assert {k: c["status"] for k, c in status.items()} == {"good": "pass", "bad": "fail", "raises": "error",
                                                            "layer": "pass"}
    assert {m["input"] for m in status["bad"]["mismatches"]} == {"x"}
    assert status["layer"]["kind"] == "vjp" and status["good"]["kind"] == "grad"
    assert doc["summary"]["passed"] == 2 and doc["summary"]["failed"] == 1 and doc["summary"]["errors"] == 1


def test_end_to_end_a_raising_function_shows_only_the_users_frames(tmp_path):
    f = tmp_path / "model.py"
    f.write_text(E2E_MODEL)
    r = check(f)
    assert r.exit_code == 1
    assert "IndexError" in r.stdout and "np.tanh(x)[5]" in r.stdout and "return helper(x)" in r.stdout
    frames = [line for line in r.stdout.splitlines() if line.strip().startswith("File ")]
    assert frames and all("model.py" in line for line in frames), frames
    assert "gradcli/" not in r.stdout.replace(str(tmp_path), "")
    assert "2 passed, 1 failed, 1 error" in r.stdout


SLIGHTLY_OFF = textwrap.dedent('''
    import numpy as np
    import gradcli


    @gradcli.check(x=(3,))
    def f(x):
        return np.sum(np.sin(x))


    @f.grad
    def f_grad(x):
        return 1.01 * np.cos(x)  # 1% off
''')


def test_end_to_end_pyproject_defaults_and_options_over_them(tmp_path):
    (tmp_path / "model.py").write_text(SLIGHTLY_OFF)
    assert check("model.py", cwd=tmp_path).exit_code == 1
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nrtol = 0.1\n")
    assert check("model.py", cwd=tmp_path).exit_code == 0
    assert check("model.py", "--rtol", "1e-6", cwd=tmp_path).exit_code == 1


def test_end_to_end_a_bad_pyproject_table_is_exit_2(tmp_path):
    (tmp_path / "model.py").write_text(SLIGHTLY_OFF)
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nrtoll = 0.1\n")
    r = check("model.py", cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "rtoll" in r.stderr and len(r.stderr.splitlines()) == 1
