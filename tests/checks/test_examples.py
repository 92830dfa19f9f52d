"""The shipped examples: every correct model passes, every deliberately broken one fails, and the
report names the input the bug is in (docs/contract.md, the model file)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from gradcli.checks.collect import collect
from gradcli.cli import main
from cli_helpers import RUNNER, numpy_examples


EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")
CORRECT = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
#: each bug file -> the inputs whose gradient is wrong (and only those)
BUGS = {
    "missing_transpose.py": {"x"},
    "wrong_axis.py": {"b"},
    "forgotten_mean.py": {"w"},
    "product_rule.py": {"x"},
    "eps_mismatch.py": {"x", "gamma"},
    "single_element.py": {"x"},
}


def run(*args):
    r = RUNNER.invoke(main, ["check", *args, "--json"], catch_exceptions=False)
    return r, json.loads(r.stdout)


def test_the_examples_cover_the_models_the_readme_promises():
    assert {"affine.py", "softmax_ce.py", "batchnorm.py", "rnn_step.py", "attention.py", "mlp.py"} <= set(CORRECT)
    assert set(BUGS) == set(f for f in os.listdir(os.path.join(EXAMPLES, "bugs")) if f.endswith(".py"))


def test_the_whole_folder_correct_ones_pass_broken_ones_fail():
    r, doc = run(*numpy_examples())
    assert r.exit_code == 1, r.stderr
    assert r.stderr == ""
    by_file = {}
    for c in doc["checks"]:
        by_file.setdefault(os.path.basename(c["file"]), []).append(c["status"])
        in_bugs = os.sep + "bugs" + os.sep in os.path.normpath(c["file"])
        assert c["status"] == ("fail" if in_bugs else "pass"), (c["name"], c["message"])
    assert set(by_file) == set(CORRECT) | set(BUGS)


def test_the_correct_examples_alone_exit_0():
    r, doc = run(*(os.path.join(EXAMPLES, f) for f in CORRECT))
    assert r.exit_code == 0, [(c["name"], c["message"]) for c in doc["checks"] if c["status"] != "pass"]
    assert doc["summary"]["passed"] == len(doc["checks"]) >= 6


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_bug_fails_and_names_the_input(name):
    r, doc = run(os.path.join(EXAMPLES, "bugs", name))
    assert r.exit_code == 1
    (c,) = doc["checks"]
    assert c["status"] == "fail", c["message"]
    assert c["mismatches"], c["message"]
    assert {m["input"] for m in c["mismatches"]} <= BUGS[name]
    assert c["mismatches"][0]["input"] in BUGS[name]


def test_a_bug_on_a_single_element_is_found_on_that_element():
    _, doc = run(os.path.join(EXAMPLES, "bugs", "single_element.py"))
    (m,) = doc["checks"][0]["mismatches"]
    assert (m["input"], m["index"], m["got"]) == ("x", [7], 0.0)


def _numerical_vjp(fn, inputs, g, name, h=1e-6):
    x = inputs[name]
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = np.sum(fn(**inputs) * g)
        x[idx] = old - h
        down = np.sum(fn(**inputs) * g)
        x[idx] = old
        out[idx] = (up - down) / (2 * h)
    return out


def test_a_bug_of_1e_3_relative_is_found():
    """The premise, checked independently of gradcli: the vjp is off by about 1e-3 relative (normwise)."""
    (spec,), _ = collect([os.path.join(EXAMPLES, "bugs", "eps_mismatch.py")])
    rng = np.random.default_rng(0)
    inputs = {k: rng.standard_normal(v) for k, v in spec.inputs.items()}
    g = rng.standard_normal(spec.fn(**inputs).shape)
    got = dict(zip(inputs, spec.vjp(g, **inputs)))
    for name in ("x", "gamma"):
        ref = _numerical_vjp(spec.fn, inputs, g, name)
        assert 1e-4 < np.linalg.norm(got[name] - ref) / np.linalg.norm(ref) < 5e-3
    r, doc = run(os.path.join(EXAMPLES, "bugs", "eps_mismatch.py"))
    assert r.exit_code == 1 and doc["checks"][0]["status"] == "fail"
