"""examples/frameworks/softplus.py, the complete example of docs/frameworks.md: the page shows the file as
it is, and its checks decide as its docstring says, against softplus' derivative computed here."""
import os
import re

import numpy as np
import pytest

from cli_helpers import EXAMPLES, check, strict_json
from gradcli.checks.registry import materialize

FILE = os.path.join(EXAMPLES, "frameworks", "softplus.py")
PAGE = os.path.join(EXAMPLES, os.pardir, "docs", "frameworks.md")


def test_the_page_shows_the_file_whole():
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    with open(FILE, encoding="utf-8") as f:
        source = f.read()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert source in blocks


def test_the_torch_function_fails_and_the_jax_rule_passes():
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    res = check(FILE, "--json")
    assert res.exit_code == 1, res.stderr
    got = {c["name"]: c for c in strict_json(res.stdout)["checks"]}
    assert got["logcosh"]["status"] == "pass" and got["Softplus"]["status"] == "fail"
    # the entries shown: softplus' derivative sigmoid(x) expected, the backward's sigmoid(-x) got
    x = materialize({"x": (2, 3)})["x"]
    for m in got["Softplus"]["mismatches"]:
        xi = x[tuple(m["index"])]
        assert m["expected"] == pytest.approx(1 / (1 + np.exp(-xi)), rel=1e-9)
        assert m["got"] == pytest.approx(1 / (1 + np.exp(xi)), rel=1e-9)
