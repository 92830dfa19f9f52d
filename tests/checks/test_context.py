"""checks/ as data: a frozen context built once per check, comparisons that return outcomes without
touching a result, one session for the CLI and the pytest plugin."""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import textwrap

import numpy as np
import pytest

from gradcli.checks import session
from gradcli.checks.comparisons.full import compare_full, judge
from gradcli.checks.context import CheckContext, Outcome, Verdict
from gradcli.checks.comparisons.fast import compare_fast
from gradcli.checks.registry import build_spec
from gradcli.checks.result import CheckResult
from gradcli.checks.runner import apply, build_context
from gradcli.cli import main
from cli_helpers import PLAIN_ENV, RUNNER

X = np.array([0.5, -1.0, 2.0, 0.25])


def loss(x):
    return np.sum(np.sin(x) * x)


def loss_grad(x):
    return np.cos(x) * x + np.sin(x)


def context(grad, **options) -> CheckContext:
    spec = build_spec(loss, grad=grad, x=X, **options)
    ctx = build_context(spec, dict(spec.options), CheckResult("loss", "", 0, spec.kind, "pass"))
    assert isinstance(ctx, CheckContext)
    return ctx


def test_the_context_is_frozen_and_resolved():
    ctx = context(loss_grad, rtol=1e-7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.rtol = 1.0
    assert (ctx.rtol, ctx.atol, ctx.dtype, ctx.wrt, ctx.n, ctx.m, ctx.scalar) == (1e-7, 0.0, "float64", ("x",), 4, 1,
                                                                                   True)
    assert ctx.mode == "full" and ctx.ad is not None and np.array_equal(ctx.f0, [loss(X)])


def test_a_function_that_cannot_run_gives_a_verdict_not_a_context():
    spec = build_spec(lambda x: 1 / 0, x=X)
    built = build_context(spec, {}, CheckResult("f", "", 0, spec.kind, "pass"))
    assert isinstance(built, Verdict) and built.status == "error" and "ZeroDivisionError" in built.message


@pytest.mark.parametrize("compare", [compare_full, compare_fast])
def test_comparisons_return_outcomes_and_leave_the_context_alone(compare):
    ctx = context(lambda x: loss_grad(x) * np.array([1, 1, 1.01, 1]))
    before = (ctx.f0.copy(), {k: v.copy() for k, v in ctx.inputs.items()})
    first, again = compare(ctx), compare(ctx)
    assert isinstance(first, Outcome) and first.verdict == again.verdict and first.mismatches == again.mismatches
    assert first.verdict.status == "fail"
    assert np.array_equal(ctx.f0, before[0]) and np.array_equal(ctx.inputs["x"], before[1]["x"])
    ok = compare(context(loss_grad))
    assert ok.verdict.status == "pass" and ok.mismatches in (None, ())


def test_a_gradient_that_raises_is_a_fail_outcome_that_stops_the_check():
    def broken(x):
        raise ValueError("no")
    out = compare_full(context(broken))
    assert out.stop and out.verdict.status == "fail" and "ValueError: no" in out.verdict.message
    assert "broken" in out.verdict.traceback


def test_judge_reads_only_its_arguments_and_the_tolerances():
    ctx = context(loss_grad, rtol=1e-3, atol=0.0)
    ref = np.array([[1.0, 2.0, 0.0]])
    got = np.array([[1.0005, 2.01, 0.0]])
    diff, tol, failed, undecided, live = judge(ctx, got, ref, np.zeros_like(ref), np.full(ref.shape, 1.0))
    # |1.0005 - 1| = 5e-4 <= 1e-3 * 1; |2.01 - 2| = 1e-2 > 1e-3 * 2 (+ 10 ulp floor)
    assert failed.tolist() == [[False, True, False]] and not undecided.any() and live.all()
    wide = dataclasses.replace(ctx, rtol=1e-2)
    assert not judge(wide, got, ref, np.zeros_like(ref), np.full(ref.shape, 1.0))[2].any()
    # an error estimate larger than the tolerance leaves an agreeing entry undecided
    undecided = judge(ctx, ref, ref, np.full(ref.shape, 1.0), np.full(ref.shape, 1.0))[3]
    assert undecided.all()


def test_apply_is_where_the_status_is_set():
    r = CheckResult("f", "", 0, "grad", "pass", message="first")
    apply(r, Outcome(notes=("a",), suffix="; more"))
    assert (r.status, r.message, r.notes) == ("pass", "first; more", ["a"])
    apply(r, Outcome(verdict=Verdict("fail", "wrong", "tb"), errors=(1.0, 2.0)))
    assert (r.status, r.message, r.traceback, r.max_abs_error, r.max_rel_error) == ("fail", "wrong", "tb", 1.0, 2.0)


def test_the_session_gives_the_cli_s_verdicts(tmp_path):
    model = tmp_path / "m.py"
    model.write_text(textwrap.dedent('''
        import numpy as np
        import gradcli

        @gradcli.check(x=np.array([0.5, 2.0]))
        def good(x):
            return np.sum(x ** 3)

        @good.grad
        def good_grad(x):
            return 3 * x ** 2

        @gradcli.check(x=np.array([0.5, 2.0]))
        def bad(x):
            return np.sum(x ** 3)

        @bad.grad
        def bad_grad(x):
            return 3.1 * x ** 2
        '''))
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nrtol = 0.05\n")
    defaults = session.load_defaults(str(model))
    assert defaults == {"rtol": 0.05}
    specs, errors = session.collect([str(model)])
    report = session.run_checks(specs, defaults, errors)
    assert [c.status for c in report.checks] == ["pass", "pass"] and report.exit_code == 0  # 3.1 vs 3 is in 5%
    strict = session.run_checks(specs, {}, errors)
    assert [c.status for c in strict.checks] == ["pass", "fail"] and strict.exit_code == 1
    cli = RUNNER.invoke(main, ["check", str(model), "--json", "--rtol", "1e-6"], env=PLAIN_ENV)
    assert [c["status"] for c in json.loads(cli.stdout)["checks"]] == ["pass", "fail"]
    assert [c["message"] for c in json.loads(cli.stdout)["checks"]] == [c.message for c in strict.checks]


def test_the_pytest_plugin_does_not_import_the_cli():
    import gradcli.pytest_plugin as plugin

    tree = ast.parse(open(plugin.__file__).read())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and not [m for m in imported if m == "cli" or m.startswith(("cli.", "gradcli.cli"))]
    names = [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert "gradcli.checks.session" in names


def test_no_import_cycle_in_checks():
    folder = os.path.dirname(session.__file__)
    packages = {""} | {d for d in os.listdir(folder) if os.path.isfile(os.path.join(folder, d, "__init__.py"))}

    def imported(n):
        """The checks modules an ``from gradcli.checks... import ...`` names, relative to the folder."""
        where = n.module[len("gradcli.checks"):].lstrip(".")
        if where in packages:  # from gradcli.checks.comparisons import numeric, taylor
            return {f"{where}.{a.name}".lstrip(".") for a in n.names}
        return {where}

    graph = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                rel = os.path.relpath(os.path.join(root, name[:-3]), folder).replace(os.sep, ".")
                tree = ast.parse(open(os.path.join(root, name)).read())
                graph[rel] = set().union(*[imported(n) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                                           and (n.module or "").startswith("gradcli.checks")])

    def on_a_cycle(start):
        todo, seen = list(graph.get(start, ())), set()
        while todo:
            m = todo.pop()
            if m == start:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        return False
    assert graph["comparisons.full"] and graph["process.worker"] and not [m for m in graph if on_a_cycle(m)]
