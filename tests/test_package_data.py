"""The JSON Schemas ship inside the package: a wheel built from the sources holds every one, and they
read back as docs/json.md shows (importlib.resources), describing a real --json document."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from importlib.resources import files

import pytest

from cli_helpers import strict_json
from docs_blocks import ROOT
from test_docs import invoke

SOURCES = ROOT / "gradcli" / "schemas"


def test_the_schemas_read_back_as_the_json_page_shows():
    page = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    assert 'files("gradcli") / "schemas" / "grad.json"' in page
    installed = files("gradcli") / "schemas"
    names = sorted(p.name for p in installed.iterdir() if p.name.endswith(".json"))
    assert names == sorted(p.name for p in SOURCES.glob("*.json")) and len(names) == 8
    jsonschema = pytest.importorskip("jsonschema")
    doc = strict_json(invoke("grad", "x**2*sin(y)", "--at", "x=1.5, y=0.3", "--json").stdout)
    schema = json.loads((installed / "grad.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "not_a_field": 1}, schema)


def test_a_wheel_of_the_sources_holds_every_schema(tmp_path):
    # the build backend must be installed here (offline, no build isolation): setuptools 70.1 and
    # later build wheels themselves; a venv of Python 3.12 or later has no setuptools of its own
    pytest.importorskip("setuptools.command.bdist_wheel", reason="needs setuptools >= 70.1 in this environment")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "gradcli", src / "gradcli", ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("gradcli-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n.split("/")[-1]: zf.read(n) for n in zf.namelist() if n.startswith("gradcli/schemas/")}
    assert shipped == {p.name: p.read_bytes() for p in SOURCES.glob("*.json")}
