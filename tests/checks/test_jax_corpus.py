"""The JAX corpus (tests/checks/jax_corpus.py): every bug fails naming its inputs, every correct twin passes,
in float64 and float32; jax.test_util.check_grads is the independent reference; and the model files in
examples/jax give the verdicts their docstrings promise through ``gradcli check``."""
import functools
import os

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax_corpus as corpus  # noqa: E402 - it imports jax
from cli_helpers import check, strict_json  # noqa: E402
from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "jax")
BUGS = [c for c in corpus.CASES if c.buggy]
CORRECT = [c for c in corpus.CASES if not c.buggy]
FLOAT32_ONLY = [c for c in BUGS if c.dtypes == ("float32",)]


@functools.lru_cache(maxsize=None)
def verdict(name: str, dtype: str):
    case = corpus.BY_NAME[name]
    return run_check(build_spec(case.target, **case.inputs, **case.options, dtype=dtype), {})


@functools.lru_cache(maxsize=None)
def check_grads_passes(name: str) -> bool:
    """jax.test_util.check_grads, reverse mode, first order, in float64, on the inputs gradcli draws."""
    jax.config.update("jax_enable_x64", True)  # as a gradcli jax check does: float64 is float64
    f, args = corpus.check_grads_call(corpus.BY_NAME[name])
    try:
        check_grads(f, args, order=1, modes=["rev"])
    except AssertionError:
        return False
    except NotImplementedError as exc:  # JAX cannot transpose the rule: there is no reverse mode to pass
        assert "Transpose rule" in str(exc)
        return False
    return True


def _ids(cases):
    return [c.name for c in cases]


def test_the_corpus_pairs_each_bug_with_a_correct_twin_on_small_arrays():
    assert len(BUGS) >= 12 and len(corpus.BY_NAME) == len(corpus.CASES)
    kinds = (jax.custom_vjp, jax.custom_jvp)
    assert {type(c.target) for c in corpus.CASES} == set(kinds)
    for bug in BUGS:
        twin = corpus.BY_NAME[bug.twin]
        assert not twin.buggy and set(twin.inputs) == set(bug.inputs), bug.name
        assert bug.bad or bug.says, bug.name  # every bug says where it is
        assert bug.bad <= set(bug.inputs), bug.name
    for case in corpus.CASES:
        assert isinstance(case.target, kinds) and case.name.startswith(case.target.fun.__name__)
        assert max(np.size(v) for v in corpus.values(case).values()) <= 64, case.name


@pytest.mark.parametrize("case, dtype", [(c, d) for c in BUGS for d in c.dtypes],
                         ids=[f"{c.name}-{d}" for c in BUGS for d in c.dtypes])
def test_every_bug_fails_naming_its_inputs(case, dtype):
    r = verdict(case.name, dtype)
    assert r.status == "fail", r.message
    assert r.name == case.name  # the rule's own name, as a report shows it
    assert {m.input for m in r.mismatches} == case.bad, r.message
    assert case.says in r.message


@pytest.mark.parametrize("case", CORRECT, ids=_ids(CORRECT))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_correct_rule_passes(case, dtype):
    r = verdict(case.name, dtype)
    assert r.status == "pass", r.message
    assert not r.mismatches
    assert r.reference == "jax_autodiff", r.notes  # the rule-free primal's AD agreed with the differences


@pytest.mark.parametrize("case", FLOAT32_ONLY, ids=_ids(FLOAT32_ONLY))
def test_a_cancellation_bug_is_right_in_float64(case):
    # the rule is exact in exact arithmetic: only float32's rounding of 1 - s makes it wrong
    assert verdict(case.name, "float64").status == "pass"


def test_a_straight_through_estimator_is_not_the_derivative():
    # round's derivative is 0 between its steps; the estimator hands the cotangent straight through
    # (1 for a basis cotangent): a deliberate training choice, and still not the gradient
    r = verdict("quantize_straight_through", "float64")
    assert r.status == "fail" and r.mismatches
    assert all(m.expected == 0 and m.got == 1 for m in r.mismatches), r.mismatches[:3]
    assert verdict("quantize", "float64").status == "pass"


@pytest.mark.parametrize("case", corpus.CASES, ids=_ids(corpus.CASES))
def test_gradcli_fails_every_rule_check_grads_fails(case):
    if not check_grads_passes(case.name):
        assert verdict(case.name, "float64").status == "fail"


def test_check_grads_is_a_working_reference_on_this_corpus():
    assert all(check_grads_passes(c.name) for c in CORRECT), [c.name for c in CORRECT if not check_grads_passes(c.name)]
    # a float32 cancellation is invisible to a float64 check; every other bug is caught
    missed = {c.name for c in BUGS if check_grads_passes(c.name)}
    assert missed == {c.name for c in FLOAT32_ONLY}


#: each check in examples/jax -> the inputs its failure names (None: it passes)
EXAMPLE_VERDICTS = {
    "attention_scores": None,
    "attention_scores_missing_scale": {"q"},
    "attention_scores_missing_transpose": {"k"},
    "rmsnorm": None,
    "rmsnorm_eps_mismatch": {"x", "w"},
    "rmsnorm_block": None,
    "softmax_xent": None,
    "softmax_xent_no_batch_divide": {"z"},
    # examples/jax/parity.py: second order and forward mode
    "cube": None,
    "cube_stopped": {"x"},
    "sine": None,
    "sine_offset": {"J u"},
}


def test_the_jax_examples_pass_and_fail_as_their_docstrings_say():
    # JAX's runtime is up in this process, so each model file is checked in a fresh interpreter
    res = check(EXAMPLES, "--json")
    doc = strict_json(res.stdout)
    assert res.exit_code == 1, res.stderr
    got = {c["name"]: c for c in doc["checks"]}
    assert len(got) == len(doc["checks"]) and set(got) == set(EXAMPLE_VERDICTS)
    for name, bad in EXAMPLE_VERDICTS.items():
        c = got[name]
        assert c["status"] == ("pass" if bad is None else "fail"), (name, c["message"])
        assert {m["input"] for m in c["mismatches"]} == (bad or set()), (name, c["message"])
    assert got["cube_stopped"]["message"].startswith("second order: JAX's vjp of its vjp disagrees")
    assert got["sine_offset"]["message"].startswith("forward mode (JAX's jvp) disagrees")
    assert got["rmsnorm_block"]["dtype"] == "float32"
