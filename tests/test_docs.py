"""The README and the docs site say what gradcli does: their console sessions are run (tests/docs_blocks.py),
the quick start's output is the real one, every --json document fits its JSON Schema in gradcli/schemas/,
every option and [tool.gradcli] key is documented, and ``mkdocs build --strict`` builds the site."""
from __future__ import annotations

import contextlib
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
import other_libm
from cli_helpers import RUNNER, check, strict_json
from docs_blocks import ENV, ROOT
from gradcli.checks.config import KEYS
from gradcli.checks.spec import OPTIONS
from gradcli.cli import COMMANDS, load_command, main

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SCHEMAS = ROOT / "gradcli" / "schemas"
SESSIONS = [s for path in docs_blocks.doc_files() for s in docs_blocks.sessions(path)]


def invoke(*args):
    """``gradcli ARGS`` in this process, as the docs' sessions run (no colour, a pipe's width)."""
    return RUNNER.invoke(main, list(args), env=ENV, catch_exceptions=False)


# --- console sessions ---------------------------------------------------------------------------

def test_the_docs_have_console_sessions():
    pages = {s.path.name for s in SESSIONS}
    assert {"README.md", "grad.md", "check.md", "getting-started.md"} <= pages


def _run_session(session) -> list:
    args, _ = docs_blocks.argv(session.command)
    if args[0] in ("plot", "steps") and "--json" not in args and "--save" not in args:
        pytest.importorskip("plotext")  # a terminal picture needs the plot extra
    if "examples/frameworks" in session.command:  # a model file of torch and JAX checks needs both extras
        pytest.importorskip("torch")
        pytest.importorskip("jax")
    if _kernels(session):
        _need_triton()
    return docs_blocks.run(session.command).splitlines()


def _need_triton():
    """Skip without the triton extra; found, not imported (the examples switch the interpreter on first)."""
    import importlib.util
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("the example kernels need the triton extra (pip install '.[triton]')")


def _kernels(session) -> bool:
    """A session that runs the Triton example kernels (figures from torch and Triton, not from numpy's libm)."""
    return "examples/triton" in session.command


@pytest.mark.parametrize("session", SESSIONS, ids=[s.name for s in SESSIONS])
def test_console_session(session):
    actual = _run_session(session)
    if not docs_blocks.matches(session.expected, actual):
        diff = "\n".join(difflib.unified_diff(docs_blocks.normalise(session.expected),
                                              docs_blocks.normalise(actual), "the page", "gradcli", lineterm=""))
        pytest.fail(f"{session.name}: $ {session.command}\n{diff}\n"
                    f"(after a deliberate change: python tests/docs_blocks.py --update {session.path})")


@pytest.mark.parametrize("machine", other_libm.MACHINES, ids=["other", "another"])
def test_console_sessions_do_not_pin_this_machines_rounding(machine):
    """Every session still matches on a machine whose libm rounds sin, exp, log ... one ulp differently
    (tests/other_libm.py): no page pins a digit that depends on the CPU's libm or SIMD width."""
    drifted = []
    # the kernel sessions' figures are torch's and Triton's (numpy's libm is not theirs), and the
    # interpreter takes seconds per kernel: they run once, in test_console_session
    # likewise the torch and JAX example's (JAX's ml_dtypes cannot load under the patched ufuncs)
    for session in [s for s in SESSIONS if not _kernels(s) and "examples/frameworks" not in s.command]:
        with other_libm.one_ulp_off(machine):
            actual = _run_session(session)
        if not docs_blocks.matches(session.expected, actual):
            drifted.append(session.name + "\n" + "\n".join(difflib.unified_diff(
                docs_blocks.normalise(session.expected), docs_blocks.normalise(actual), "the page", "gradcli",
                lineterm="")))
    assert not drifted, "\n".join(drifted)


def test_a_session_that_drifted_fails():
    """The comparison sees a changed digit, and '...' stands only for whole lines."""
    real = docs_blocks.run('gradcli grad "x*y" --at "x=2, y=3" --method forward').splitlines()
    assert docs_blocks.matches(real, real)
    assert docs_blocks.matches([real[0], docs_blocks.ELLIPSIS, real[-1]], real)
    changed = [line.replace("3.0", "3.1") for line in real]
    assert changed != real and not docs_blocks.matches(changed, real)
    assert not docs_blocks.matches([real[0], docs_blocks.ELLIPSIS, real[-1][:-1]], real)


@pytest.mark.parametrize("page, printed, same", [
    # rounding-level relative errors: within a factor of 10, those under float64's epsilon counted as epsilon
    ("│       1.2e-16 │", "│       2.3e-16 │", True), ("│ 6.4e-19│", "│ 1.3e-16│", True),
    ("│ 1.4e-12│", "│ 8.3e-12│", True), ("| 1.4e-12 |", "| 1.5e-11 |", False),
    ("│ 1.2e-16│", "│ 4.4e-15│", False), ("│ 1.2e-16│", "│       0│", False),
    ("rel err 7.4e-03", "rel err 7.5e-03", False), ("max rel err 1.0e+01", "max rel err 1.0e+00", False),
    # long figures (values, estimates) to 1e-9 relative, with the spaces that pad them
    ("value: 0.6649204649880139", "value: 0.664920464988014", True),
    ("value: 0.6649204649880139", "value: 0.6649204639", False),
    ("│ 0.88656061998 │", "│ 0.88656061999 │", True), ("│ 0.88656061998 │", "│ 0.88656062998 │", False),
    ("│  0.3707372017 │", "│ 0.37073720171 │", True),
    ("│ 2.1495071005 │", "│2.1495071005│", False),  # the spaces may change in number, not vanish
    # short figures exactly, zeros of either sign
    ("estimate 1.5 (row 2, column 2)", "estimate 1.5 (row 3, column 2)", False),
    ("h = 6.06e-06", "h = 6.07e-06", False), ("exit 0", "exit 1", False),
    (" 0.00┤", "-0.00┤", True), ("-0.00┤", " 0.00┤", True), (" 0.00┤", " 0.01┤", False),
    # marked figures: a tolerance, elided digits
    ("central +2.00 | -1.00±0.2", "central +2.00 | -0.83", True), ("| -1.00±0.2", "| -0.79", False),
    ("gives -827.9037…; log1p", "gives -827.903711319; log1p", True),
    ("gives -827.9037…;", "gives -827.9039;", False), ("gives -827.9037…;", "gives -827.9037…;", True),
    ("0.370737…", "0.37073720166", True), ("0.370737…", "0.37073", False),
])
def test_figures_are_compared_by_their_kind(page, printed, same):
    assert docs_blocks.line_matches(page, printed) is same


UPDATED = 'gradcli grad "sin(x)" --at x=1 --method forward,central'


def test_update_keeps_what_still_matches_and_the_marks(tmp_path, monkeypatch):
    real = docs_blocks.tidy(docs_blocks.run(UPDATED).splitlines())
    at = {line.split(" ")[0]: i for i, line in enumerate(real)}
    written = list(real)
    written[at["value:"]] = "value: 0.84147…"  # a marked figure that still matches: kept
    written[at["✓"]] = "✓ agree: 2 methods agree within 0.1±0.1"  # a marked line that no longer does
    written[at["at"]] = "at x = 2.0"  # a stale line
    written[at["f(x)"]:at["f(x)"] + 1] = [docs_blocks.ELLIPSIS]  # an elision
    written.insert(len(written) - 1, "a line gradcli no longer prints")
    page = tmp_path / "page.md"
    page.write_text("# a page\n\n```console\n$ " + UPDATED + "\n" + "\n".join(written) + "\n```\nafter\n",
                    encoding="utf-8")
    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    assert docs_blocks.update(page) == ["page.md:15"]  # the marked line it had to rewrite, listed
    (session,) = docs_blocks.sessions(page)
    assert session.expected == [docs_blocks.ELLIPSIS, "at x = 1.0", "value: 0.84147…", *real[3:]]
    assert page.read_text(encoding="utf-8").endswith("\n```\nafter\n")


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


def _quick_start() -> tuple:
    """(the quick start's command, the output the README shows for it)."""
    lines = _readme()
    run_line = next(i for i, line in enumerate(lines) if ".venv/bin/gradcli grad" in line)
    command = lines[run_line].split(".venv/bin/gradcli ", 1)[1]
    blocks = [b for b in docs_blocks.fenced_blocks(lines) if b[1] > run_line + 1]
    _, start, stop = blocks[0]
    return command, lines[start:stop]


@pytest.mark.parametrize("machine", [None, *other_libm.MACHINES], ids=["this", "other", "another"])
def test_quick_start_output_is_the_real_output(machine):
    """Byte for byte (trailing spaces too) but the rounding-level figures: the relative errors within a factor
    of 10, the 11- and 17-digit values to 1e-9 (tests/docs_blocks.py); the method names, the layout and the
    verdict exactly. On this machine, and on two that round sin one ulp differently."""
    command, page = _quick_start()
    with other_libm.one_ulp_off(machine) if machine else contextlib.nullcontext():
        result = invoke(*shlex.split(command))
    assert result.exit_code == 0 and result.stdout.endswith("\n")
    printed = result.stdout[:-1].split("\n")
    assert docs_blocks.matches_unnormalised(page, printed), "\n".join(difflib.unified_diff(
        page, printed, "README.md", "gradcli", lineterm=""))
    assert page[-1] == printed[-1] == "✓ agree: 6 methods agree with the symbolic reference"


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
    site = tmp_path / "site"
    assert (site / "index.html").exists() and (site / "schemas" / "grad.json").exists()
    # site_url: a sitemap of every page, and a 404 page whose links work under the site's sub-path
    assert (site / "sitemap.xml").read_text(encoding="utf-8").count("<loc>") >= len(list(DOCS.glob("*.md")))
    assert 'href="/gradcli/assets/' in (site / "404.html").read_text(encoding="utf-8")
    # console outputs are sized by extra.css, which selects them by their language class
    grad = (site / "grad" / "index.html").read_text(encoding="utf-8")
    assert "stylesheets/extra.css" in grad and '<div class="language-console highlight">' in grad
    assert ".language-console.highlight" in (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")


# --- the kernels page's run, compared figure-blind ----------------------------------------------------

_ANY_FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?")


def _figure_blind(lines: list) -> list:
    """Lines with every figure replaced by '#' and runs of spaces squeezed (a figure's width moves them)."""
    return [re.sub(r" +", " ", _ANY_FIGURE.sub("#", line)).rstrip() for line in lines]


def test_the_kernels_page_run_matches_a_fresh_one_word_for_word():
    """docs/kernels.md shows a run of the Triton example kernels as text: the errors' last digits depend
    on the CPU's math library and vector width (the interpreter computes with numpy, fp16 rounding
    amplifies an ulp), so every word, status, column and line is compared, not the figures."""
    _need_triton()
    command = "gradcli check examples/triton/check_one_size.py"
    page = (DOCS / "kernels.md").read_text().splitlines()
    start = page.index(f"$ {command}") + 1
    shown = page[start:page.index("```", start)]
    actual = docs_blocks.run(command).rstrip("\n").splitlines()
    assert _figure_blind(shown) == _figure_blind(actual)
    assert sum("FAIL" in line for line in shown) >= 2 and any("PASS" in line for line in shown)
