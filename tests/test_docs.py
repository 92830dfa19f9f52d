"""The README and the docs site say what gradcli does: their console sessions are run (tests/docs_blocks.py),
the quick start's output is the real one, every --json document fits its JSON Schema in docs/schemas/,
every option and [tool.gradcli] key is documented, and ``mkdocs build --strict`` builds the site."""
from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import subprocess
import sys

import click
import pytest

import docs_blocks
from cli_helpers import RUNNER, check, strict_json
from docs_blocks import ENV, ROOT
from gradcli.checks.config import KEYS
from gradcli.checks.spec import OPTIONS
from gradcli.cli import COMMANDS, load_command, main

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SCHEMAS = DOCS / "schemas"
SESSIONS = [s for path in docs_blocks.doc_files() for s in docs_blocks.sessions(path)]


def invoke(*args):
    """``gradcli ARGS`` in this process, as the docs' sessions run (no colour, a pipe's width)."""
    return RUNNER.invoke(main, list(args), env=ENV, catch_exceptions=False)


# --- console sessions ---------------------------------------------------------------------------

def test_the_docs_have_console_sessions():
    pages = {s.path.name for s in SESSIONS}
    assert {"README.md", "grad.md", "check.md", "getting-started.md"} <= pages


@pytest.mark.parametrize("session", SESSIONS, ids=[s.name for s in SESSIONS])
def test_console_session(session):
    args, _ = docs_blocks.argv(session.command)
    if args[0] in ("plot", "steps") and "--json" not in args and "--save" not in args:
        pytest.importorskip("plotext")  # a terminal picture needs the plot extra
    actual = docs_blocks.run(session.command).splitlines()
    if not docs_blocks.matches(session.expected, actual):
        diff = "\n".join(difflib.unified_diff(docs_blocks.normalise(session.expected),
                                              docs_blocks.normalise(actual), "the page", "gradcli", lineterm=""))
        pytest.fail(f"{session.name}: $ {session.command}\n{diff}\n"
                    f"(after a deliberate change: python tests/docs_blocks.py --update {session.path})")


def test_a_session_that_drifted_fails():
    """The comparison sees a changed digit, and '...' stands only for whole lines."""
    real = docs_blocks.run('gradcli grad "x*y" --at "x=2, y=3" --method forward').splitlines()
    assert docs_blocks.matches(real, real)
    assert docs_blocks.matches([real[0], docs_blocks.ELLIPSIS, real[-1]], real)
    changed = [line.replace("3.0", "3.1") for line in real]
    assert changed != real and not docs_blocks.matches(changed, real)
    assert not docs_blocks.matches([real[0], docs_blocks.ELLIPSIS, real[-1][:-1]], real)


def test_normalisation_of_timings_and_paths():
    assert docs_blocks.normalise(["1 failed in 0.04 s   ", f"{ROOT}/examples/a.py:3", ""]) == [
        "1 failed in <T> s", "./examples/a.py:3"]


def test_sessions_run_gradcli_only():
    assert docs_blocks.argv('gradcli grad "x" --at x=1; echo $?') == (["grad", "x", "--at", "x=1"], True)
    with pytest.raises(ValueError):
        docs_blocks.argv("pip install gradcli")


# --- the README ---------------------------------------------------------------------------------

def _readme() -> list:
    return README.read_text(encoding="utf-8").splitlines()


def test_readme_is_short():
    assert len(_readme()) <= 250


def test_quick_start_output_is_the_real_output():
    lines = _readme()
    run_line = next(i for i, line in enumerate(lines) if ".venv/bin/gradcli grad" in line)
    command = lines[run_line].split(".venv/bin/gradcli ", 1)[1]
    blocks = [b for b in docs_blocks.fenced_blocks(lines) if b[1] > run_line + 1]
    _, start, stop = blocks[0]
    result = invoke(*shlex.split(command))
    assert result.exit_code == 0
    assert "\n".join(lines[start:stop]) + "\n" == result.stdout  # byte for byte, trailing spaces too


def test_ci_finds_one_test_command_between_the_markers():
    # as .ci/run reads it: the lines between the markers, less the markers and the fences
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- test -->", 1)[1].split("<!-- /test -->", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("```")]
    assert len(commands) == 1 and "pytest" in commands[0] and commands[0].startswith("python3 -m venv .venv")


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_links_outside_the_site_resolve(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        path = target.split("#")[0]
        assert "://" not in target, f"{name} points outside the repository: {target}"
        assert (ROOT / path).exists(), f"{name} links to {target}, which does not exist"


def test_no_page_points_outside_the_repository():
    for path in [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *DOCS.rglob("*.md")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"https?://|design document", text), path.name


# --- what must be documented ------------------------------------------------------------------------

PAGES = {"grad": ["grad.md", "batch-usage.md"], "check": ["check.md"], "hessian": ["hessian.md"],
         "explain": ["explain.md"], "plot": ["plot.md"], "steps": ["plot.md"]}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_option_is_on_its_command_page(name):
    assert set(PAGES) == set(COMMANDS)
    text = "".join((DOCS / page).read_text(encoding="utf-8") for page in PAGES[name])
    for param in load_command(name).params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                assert re.search("`" + re.escape(opt) + r"[\s=`\[]", text), f"{opt} of gradcli {name}"


def test_every_tool_gradcli_key_is_in_the_configuration_table():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert [k for k in KEYS if f"| `{k}` |" not in text] == []


def test_every_check_option_is_in_the_contract():
    text = (DOCS / "contract.md").read_text(encoding="utf-8")
    assert [k for k in OPTIONS if f"`{k}`" not in text] == []


def test_the_documented_completion_works():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert "_GRADCLI_COMPLETE=bash_source gradcli" in text
    script = RUNNER.invoke(main, [], env={"_GRADCLI_COMPLETE": "bash_source"}, prog_name="gradcli")
    assert "complete -o nosort -F _gradcli_completion gradcli" in script.stdout
    words = RUNNER.invoke(main, [], prog_name="gradcli", env={
        "_GRADCLI_COMPLETE": "bash_complete", "COMP_WORDS": "gradcli ste", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["plain,steps"]


# --- JSON Schemas -----------------------------------------------------------------------------------

def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))


def _branch(name: str, doc: dict) -> str:
    if doc.get("status") == "error" and "error" in doc:
        return "error"
    if name == "steps" and doc.get("status") in ("undefined", "nondifferentiable"):
        return "no_derivative"
    return "report"


def _errors(name: str, doc) -> list:
    """Where ``doc`` breaks schema ``name``, checked against the branch it claims (precise messages)."""
    js = pytest.importorskip("jsonschema")
    schema = _schema(name)
    if name == "error":
        return [e.message for e in js.Draft202012Validator(schema).iter_errors(doc)]
    branch = {"$ref": f"#/$defs/{_branch(name, doc)}", "$defs": schema["$defs"]}
    found = [f"{list(e.absolute_path)}: {e.message}" for e in js.Draft202012Validator(branch).iter_errors(doc)]
    return found or [e.message for e in js.Draft202012Validator(schema).iter_errors(doc)]


def test_schemas_are_valid_and_linked():
    js = pytest.importorskip("jsonschema")
    page = (DOCS / "json.md").read_text(encoding="utf-8")
    names = sorted(p.stem for p in SCHEMAS.glob("*.json"))
    assert names == ["check", "error", "explain", "grad", "grad-batch", "hessian", "plot", "steps"]
    for name in names:
        js.Draft202012Validator.check_schema(_schema(name))
        assert f"(schemas/{name}.json)" in page


LONG = " + ".join(f"x**{i}*y" for i in range(1, 30))  # above explain's cap: lists with gaps
JSON_RUNS = {
    "grad": [["grad", "x**2*sin(y)", "--at", "x=1.5, y=0.3"],
             ["grad", "x*y, x+y", "--at", "x=1, y=2", "--direction", "1,1"],
             ["grad", "abs(x) + 3*y", "--at", "x=0, y=1"], ["grad", "log(1 + x)/x", "--at", "x=1e-10"],
             ["grad", "sinx", "--at", "sinx=1", "--method", "forward"], ["grad", "2x", "--at", "x=1"],
             ["grad", "x", "--at", "x=1", "--rtol", "abc"]],
    "hessian": [["hessian", "x*y*z", "--at", "x=1, y=2, z=3", "--direction", "x=1"],
                ["hessian", "x**1.5", "--at", "x=0"], ["hessian", "x*y, x", "--at", "x=1, y=2"]],
    "explain": [["explain", "x*y + sin(x)", "--at", "x=1.5, y=0.3"], ["explain", "x*y, x+y", "--at", "x=1, y=2"],
                ["explain", LONG, "--at", "x=0.5, y=2"], ["explain", "sqrt(x)", "--at", "x=0"]],
    "grad-batch": [["grad", "log(x)", "--batch", "300", "--domain", "x=-1:1"],
                   ["grad", "x*y, x", "--batch", "50", "--domain", "x=0:1, y=0:1", "--method", "forward,reverse"],
                   ["grad", "x", "--batch", "0", "--domain", "x=0:1"]],
    "plot": [["plot", "tan(x)", "--x", "-3:3", "--points", "50"], ["plot", "x, x**2", "--x", "0:1", "--points", "5"],
             ["plot", "log(x)", "--x", "-2:-1", "--points", "10"], ["plot", "x*y", "--x", "0:1"]],
    "steps": [["steps", "abs(x)*x", "--at", "x=1"], ["steps", "sqrt(x)", "--at", "x=0"],
              ["steps", "x, y", "--at", "x=1, y=2"]],
}


@pytest.mark.parametrize("name, args", [(n, a) for n, runs in JSON_RUNS.items() for a in runs],
                         ids=[f"{n}:{' '.join(a[1:3])[:30]}" for n, runs in JSON_RUNS.items() for a in runs])
def test_command_json_fits_its_schema(name, args):
    result = invoke(*args, "--json")
    doc = strict_json(result.stdout)
    assert _errors(name, doc) == []
    if _branch(name, doc) == "error":
        assert result.exit_code == 2 and _errors("error", doc) == []


def test_batch_json_with_a_points_file_and_out(tmp_path):
    points = tmp_path / "pts.csv"
    points.write_text("x,y\n0.5,1\n1.5,2\n-1,0.25\n")
    out = tmp_path / "grads.npz"
    result = invoke("grad", "x*exp(y)", "--points", str(points), "--out", str(out), "--json")
    doc = strict_json(result.stdout)
    assert result.exit_code == 0 and doc["points_file"] == str(points) and doc["out"] == str(out)
    assert _errors("grad-batch", doc) == []


SECOND_ORDER = '''
import numpy as np
import gradcli

@gradcli.check(x=(3,))
def cube(x):
    return np.sum(x ** 3)

@cube.grad
def cube_grad(x):
    return 3 * x ** 2

@cube.hvp
def cube_hvp(v, x):
    return 6 * x * v
'''


def test_check_json_fits_its_schema(tmp_path):
    (tmp_path / "second.py").write_text(SECOND_ORDER)
    (tmp_path / "broken.py").write_text("import gradcli\nraise ValueError('boom')\n")
    (tmp_path / "empty.py").write_text("import gradcli\n")
    bugs = ROOT / "examples" / "bugs" / "missing_transpose.py"
    for args, code in [([bugs, ROOT / "examples" / "affine.py", "--taylor"], 1), ([tmp_path], 2),
                       ([ROOT / "examples" / "affine.py", "-k", "nothing_matches"], 2)]:
        result = check(*args, "--json")
        doc = strict_json(result.stdout)
        assert result.exit_code == code and _errors("check", doc) == []
    statuses = {c["name"]: c for c in strict_json(check(tmp_path, bugs, "--json").stdout)["checks"]}
    assert statuses["cube"]["order"] == 2 and statuses["linear"]["status"] == "fail"


@pytest.mark.parametrize("name", ["grad", "hessian", "explain", "grad-batch", "check", "plot", "steps"])
def test_schemas_refuse_what_is_not_the_document(name):
    """Each schema constrains: an unknown field, a missing field and a wrong type are refused."""
    affine = ROOT / "examples" / "affine.py"
    result = check(affine, "--json") if name == "check" else invoke(*JSON_RUNS[name][0], "--json")
    doc = strict_json(result.stdout)
    assert _errors(name, doc) == []
    first = next(iter(doc))
    assert _errors(name, {**doc, "not_a_field": 1}) != []
    assert _errors(name, {k: v for k, v in doc.items() if k != first}) != []
    assert _errors(name, {**doc, first: {"wrong": "type"}}) != []


# --- the site ---------------------------------------------------------------------------------------

def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    # not -q: quiet mode drops the warnings that --strict counts
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "site" / "index.html").exists() and (tmp_path / "site" / "schemas" / "grad.json").exists()
