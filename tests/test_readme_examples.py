"""What the README says of examples/: how many correct models and how many bugs it holds, counted by
running them (each correct model passes, each bug fails)."""
from __future__ import annotations

import re

from cli_helpers import check, strict_json
from docs_blocks import ROOT

NUMBERS = {w: n for n, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven",
                                       "eight", "nine", "ten", "eleven", "twelve"])}


def test_the_readme_counts_the_examples_and_the_bugs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"`examples/` holds (\w+) correct models and `examples/bugs/` (\w+) more", readme)
    assert said, "the README's sentence on examples/ and examples/bugs/ is gone"
    examples = sorted((ROOT / "examples").glob("*.py"))
    doc = strict_json(check(*examples, ROOT / "examples" / "bugs", "--json").stdout)
    statuses = {"examples": [], "bugs": []}
    for c in doc["checks"]:
        statuses["bugs" if "/bugs/" in c["file"].replace("\\", "/") else "examples"].append(c["status"])
    assert statuses["examples"] == ["pass"] * NUMBERS[said.group(1)]
    assert statuses["bugs"] == ["fail"] * NUMBERS[said.group(2)]
    # one check per bug file: the README counts files ("six more classic backprop bugs")
    assert len(list((ROOT / "examples" / "bugs").glob("*.py"))) == NUMBERS[said.group(2)]
