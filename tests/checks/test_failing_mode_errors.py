"""A check that fails at order 2 or in forward mode reports the errors of the comparison that failed it,
not the first order's zeros: the summary table shows them (examples/torch/parity.py, examples/jax/parity.py)."""
import os

import pytest

from cli_helpers import EXAMPLES, check, strict_json

#: check -> the method whose comparison fails it
FAILED_BY = {"torch": {"CubeDetachedGradOut": "double_backward_cotangent", "SinMulJvpDropsW": "torch_jvp"},
             "jax": {"cube_stopped": "vjp_of_vjp", "sine_offset": "jax_jvp"}}


@pytest.mark.parametrize("framework", FAILED_BY)
def test_the_summary_errors_are_the_failing_comparisons(framework):
    pytest.importorskip(framework)
    res = check(os.path.join(EXAMPLES, framework, "parity.py"), "--json")
    got = {c["name"]: c for c in strict_json(res.stdout)["checks"]}
    for name, method in FAILED_BY[framework].items():
        c = got[name]
        assert c["status"] == "fail" and c["message"].startswith(("second order", "forward mode")), c["message"]
        m = c["methods"][method]
        assert m["status"] == "mismatch"
        # the same comparison's largest difference, not the first order's 0
        assert c["max_abs_error"] == pytest.approx(m["max_abs_error"], rel=1e-12) and c["max_abs_error"] > 0
        assert c["max_rel_error"] > 0.1
        # the entries kept are among those the maxima are over
        for mm in c["mismatches"]:
            assert mm["abs_error"] <= c["max_abs_error"] * (1 + 1e-12)
            assert mm["rel_error"] <= c["max_rel_error"] * (1 + 1e-12)
