"""The torch corpus (tests/checks/torch_corpus.py): every bug fails naming its inputs, every correct twin
passes, in float64 and float32; torch.autograd.gradcheck is the independent reference; and the model
files in examples/torch give the verdicts their docstrings promise through ``gradcli check``."""
import functools
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch_corpus as corpus  # noqa: E402 - it imports torch
from cli_helpers import RUNNER  # noqa: E402
from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402
from gradcli.cli import main  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "torch")
BUGS = [c for c in corpus.CASES if c.buggy]
CORRECT = [c for c in corpus.CASES if not c.buggy]


@functools.lru_cache(maxsize=None)
def verdict(name: str, dtype: str):
    case = corpus.BY_NAME[name]
    return run_check(build_spec(case.target(), **case.inputs, **case.options, dtype=dtype), {})


@functools.lru_cache(maxsize=None)
def gradcheck(name: str, dtype=torch.float64, fast_mode=False) -> bool:
    return corpus.gradcheck(corpus.BY_NAME[name], dtype, fast_mode)


def _ids(cases):
    return [c.name for c in cases]


def _parameters(case):
    target = case.target()
    return list(target.named_parameters()) if isinstance(target, torch.nn.Module) else []


def test_the_corpus_pairs_each_bug_with_a_correct_twin_on_small_tensors():
    assert len(BUGS) >= 24 and len(corpus.BY_NAME) == len(corpus.CASES)
    for bug in BUGS:
        twin = corpus.BY_NAME[bug.twin]
        assert not twin.buggy and set(twin.inputs) == set(bug.inputs), bug.name
        assert bug.bad or bug.says, bug.name  # every bug says where it is
        assert bug.bad <= set(bug.inputs) | {n for n, _ in _parameters(bug)}, bug.name
    for case in corpus.CASES:
        sizes = [np.size(v) for v in corpus.values(case).values()] + [p.numel() for _, p in _parameters(case)]
        assert max(sizes) <= 64, case.name


@pytest.mark.parametrize("case, dtype", [(c, d) for c in BUGS for d in c.dtypes],
                         ids=[f"{c.name}-{d}" for c in BUGS for d in c.dtypes])
def test_every_bug_fails_naming_its_inputs(case, dtype):
    r = verdict(case.name, dtype)
    assert r.status == "fail", r.message
    if case.bad:
        assert {m.input for m in r.mismatches} == case.bad, r.message
    assert case.says in r.message


@pytest.mark.parametrize("case", CORRECT, ids=_ids(CORRECT))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_correct_rule_passes(case, dtype):
    r = verdict(case.name, dtype)
    assert r.status == "pass", r.message
    assert not r.mismatches


@pytest.mark.parametrize("case", [c for c in BUGS if c.dtypes == ("float32",)],
                         ids=_ids(c for c in BUGS if c.dtypes == ("float32",)))
def test_a_cancellation_bug_is_right_in_float64(case):
    # the rule is exact in exact arithmetic: only float32's rounding of 1 - s makes it wrong
    r = verdict(case.name, "float64")
    assert r.status == "pass", r.message


@pytest.mark.parametrize("case", corpus.CASES, ids=_ids(corpus.CASES))
def test_gradcli_fails_every_rule_gradcheck_fails(case):
    if not gradcheck(case.name):
        assert verdict(case.name, "float64").status == "fail"


def test_gradcheck_is_a_working_reference_on_this_corpus():
    assert all(gradcheck(c.name) for c in CORRECT), [c.name for c in CORRECT if not gradcheck(c.name)]
    caught = [c.name for c in BUGS if not gradcheck(c.name)]
    assert len(caught) >= 20, caught
    assert not gradcheck("rmsnorm_none_for_w") and not gradcheck("linear_two_gradients")


def test_a_bug_under_gradchecks_tolerance_is_still_found():
    # eps left out of the backward: ~1e-5 relative, inside gradcheck's rtol=1e-3, far outside float64's noise
    assert gradcheck("rmsnorm_eps_dropped") and gradcheck("rmsnorm_eps_dropped", fast_mode=True)
    r = verdict("rmsnorm_eps_dropped", "float64")
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x", "w"}


@pytest.mark.parametrize("name", ["xent", "rmsnorm", "layernorm", "gelu", "gated_block"])
def test_float32_false_alarms_of_gradcheck_pass_in_gradcli(name):
    # gradcheck at its float64 defaults (eps=1e-6, atol=1e-5, rtol=1e-3) on float32 tensors: the
    # differences are mostly rounding, so a right rule fails
    assert not corpus.BY_NAME[name].buggy
    assert not gradcheck(name, torch.float32)
    assert gradcheck(name, torch.float64)
    r = verdict(name, "float32")
    assert r.status == "pass", r.message


#: each check in examples/torch -> the inputs its failure names (None: it passes)
EXAMPLE_VERDICTS = {
    "AttentionScores": None,
    "AttentionScoresMissingScale": {"x", "q.weight", "q.bias"},
    "gelu_tanh": None,
    "gelu_wrong_constant": {"x"},
    "RMSNorm": None,
    "RMSNormEpsMismatch": {"x", "w"},
    "RMSNormLayer": None,
    "sigmoid_stable": None,
    "sigmoid_saturated": {"x"},
    "SoftmaxXent": None,
    "SoftmaxXentNoBatchDivide": {"z"},
}
#: examples/torch/parity.py: second order, forward mode and determinism -> (status, inputs the mismatches name)
PARITY_VERDICTS = {
    "Cube": ("pass", set()),
    "CubeDetachedGradOut": ("fail", set()),  # order 2, along the cotangent: no input element is wrong
    "CubeOnce": ("skipped", set()),
    "SinMul": ("pass", set()),
    "SinMulJvpDropsW": ("fail", {"J u"}),  # forward mode: the rows are J u entries
    "ScaleKept": ("fail", set()),
}


def test_the_torch_examples_pass_and_fail_as_their_docstrings_say():
    r = RUNNER.invoke(main, ["check", EXAMPLES, "--json"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert r.exit_code == 1, r.stderr
    got = {c["name"]: c for c in doc["checks"]}
    expected = {name: ("pass", set()) if bad is None else ("fail", bad) for name, bad in EXAMPLE_VERDICTS.items()}
    expected.update(PARITY_VERDICTS)
    assert len(got) == len(doc["checks"]) and set(got) == set(expected)
    for name, (status, bad) in expected.items():
        c = got[name]
        assert c["status"] == status, (name, c["message"])
        assert {m["input"] for m in c["mismatches"]} == bad, (name, c["message"])
    assert "cotangent" in got["CubeDetachedGradOut"]["message"]
    assert "once_differentiable" in got["CubeOnce"]["message"]
    assert got["SinMulJvpDropsW"]["message"].startswith("forward mode (torch's jvp) disagrees")
    assert "not deterministic" in got["ScaleKept"]["message"]
