"""The docs' pictures (docs/images/) are current: made by docs/make_pictures.py as it reads now, each one
shown in the docs, and (``-m pictures``, a slow run of every command) drawn again at the same sizes.
Pixels are never compared: the steps V follows the last bits of the machine's libm and text its FreeType."""
from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from docs_blocks import ROOT
from gradcli.core.parser import parse
from gradcli.plotting.data import plot_data
from gradcli.plotting.render import _kinks

IMAGES = ROOT / "docs" / "images"


def _script():
    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _manifest(folder) -> dict:
    return json.loads((folder / SCRIPT.MANIFEST).read_text(encoding="utf-8"))


def test_the_manifest_records_what_the_script_runs_now():
    manifest = _manifest(IMAGES)
    assert [p["file"] for p in manifest["pictures"]] == list(SCRIPT.PICTURES)
    assert [p["command"] for p in manifest["pictures"]] == [SCRIPT.command(n) for n in SCRIPT.PICTURES]
    # nothing in the folder that the script does not make
    assert sorted(p.name for p in IMAGES.iterdir()) == sorted([*SCRIPT.PICTURES, SCRIPT.MANIFEST])


def test_each_picture_is_the_size_recorded_and_shown_in_the_docs():
    pages = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    for picture in _manifest(IMAGES)["pictures"]:
        assert SCRIPT.png_size(IMAGES / picture["file"]) == picture["size"]
        shown = [name for name, text in pages.items() if re.search(rf"!\[[^\]]+\]\(images/{picture['file']}\)", text)]
        assert shown, f"{picture['file']} is shown on no page"


@pytest.mark.parametrize("expr, kinks", [("abs(x**2 - 1)", [-1.0, 1.0]), ("max(x, 0.5) + abs(x)", [0.0, 0.5]),
                                         ("abs(x)**2", []), ("sign(x)", []), ("tan(x)", [])])
def test_the_plot_picture_marks_kinks_only(expr, kinks):
    """Kinks (f continuous, f' jumps) are marked; a smooth crossing, a jump of f and a pole are not."""
    data = plot_data(parse(expr), "x", -2.0, 2.0, {}, n=400)
    found = _kinks(data)
    step = 4.0 / 399
    assert found.shape == (len(kinks),) and np.all(np.abs(found - np.array(kinks)) <= step / 2 + 1e-12)


@pytest.mark.pictures
def test_the_script_draws_the_same_pictures_again(tmp_path):
    pytest.importorskip("matplotlib")
    made = SCRIPT.make(tmp_path)
    assert made == _manifest(IMAGES)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in IMAGES.iterdir())
