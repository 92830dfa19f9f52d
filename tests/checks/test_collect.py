"""Collection: model files and folders -> CheckSpecs, with import failures as one-line error entries.

These model files register by appending CheckSpecs themselves, so collection is tested on its own,
whatever the registration API does on top.
"""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

from gradcli.checks import collect as collecting
from gradcli.checks.collect import collect, find_files, matches, module_name
from gradcli.checks.spec import REGISTRY


def model(path, *names, body="", value=None):
    """A model file registering one check per name (each function returns ``value`` or its name)."""
    lines = ["from gradcli.checks.spec import CheckSpec, REGISTRY", body]
    for i, name in enumerate(names):
        lines += [f"def {name}(x):", f"    return {value!r}" if value is not None else f"    return {name!r}",
                  f"REGISTRY.append(CheckSpec(name={name!r}, fn={name}, file=__file__, line={3 + 3 * i}, "
                  "inputs={'x': (3,)}))"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_file_and_its_checks(tmp_path):
    f = model(tmp_path / "m.py", "loss", "layer")
    before = len(REGISTRY)
    specs, errors = collect([f])
    assert errors == []
    assert [s.name for s in specs] == ["loss", "layer"]
    assert [s.fn(None) for s in specs] == ["loss", "layer"]
    assert len(REGISTRY) == before + 2  # the registry keeps the originals; collect returns copies


def test_folders_are_searched_recursively_and_sorted(tmp_path):
    model(tmp_path / "b.py", "fb")
    model(tmp_path / "a" / "z.py", "fz")
    model(tmp_path / "a.py", "fa")
    model(tmp_path / ".hidden" / "h.py", "fh")
    model(tmp_path / "__pycache__" / "c.py", "fc")
    model(tmp_path / "venv1" / "lib" / "v.py", "fv")
    (tmp_path / "venv1" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "helper.py").write_text("X = 1\n")  # does not use gradcli: not a model file
    (tmp_path / "notes.txt").write_text("gradcli\n")
    files, errors = find_files([tmp_path])
    assert errors == []
    assert [p.replace(str(tmp_path), "") for p in files] == ["/a/z.py", "/a.py", "/b.py"]  # by path component
    specs, errors = collect([tmp_path])
    assert [s.name for s in specs] == ["fz", "fa", "fb"]


def test_same_function_name_in_two_files_does_not_collide(tmp_path):
    model(tmp_path / "a" / "net.py", "loss", value=1)
    model(tmp_path / "b" / "net.py", "loss", value=2)
    model(tmp_path / "b" / "other.py", "unique")
    specs, errors = collect([tmp_path])
    assert errors == []
    names = [s.name for s in specs]
    assert len(set(names)) == 3 and "unique" in names
    by_name = {s.name: s for s in specs}
    a = next(n for n in names if n.endswith("a/net.py::loss"))
    b = next(n for n in names if n.endswith("b/net.py::loss"))
    assert by_name[a].fn(0) == 1 and by_name[b].fn(0) == 2  # two modules, two functions
    assert module_name(str(tmp_path / "a" / "net.py")) != module_name(str(tmp_path / "b" / "net.py"))


def test_a_name_twice_in_one_file_is_numbered(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(textwrap.dedent("""
        from gradcli.checks.spec import CheckSpec, REGISTRY
        def loss(x):
            return x
        REGISTRY.append(CheckSpec(name="loss", fn=loss, file=__file__, line=3, inputs={"x": 1.0}))
        REGISTRY.append(CheckSpec(name="loss", fn=loss, file=__file__, line=3, inputs={"x": 2.0}))
    """))
    specs, _ = collect([f])
    assert [s.name for s in specs] == ["loss", "loss[2]"]


def test_sibling_imports_work_and_sys_path_is_restored(tmp_path):
    (tmp_path / "helpers_for_gradcli_test.py").write_text("SCALE = 3\n")
    f = model(tmp_path / "m.py", "loss", body="from helpers_for_gradcli_test import SCALE")
    path_before = list(sys.path)
    specs, errors = collect([f])
    assert errors == [] and [s.name for s in specs] == ["loss"]
    assert sys.path == path_before
    sys.modules.pop("helpers_for_gradcli_test", None)


def test_a_model_importing_a_sibling_model_does_not_duplicate_its_checks(tmp_path):
    model(tmp_path / "base_model.py", "loss")
    (tmp_path / "user_model.py").write_text(textwrap.dedent("""
        import gradcli
        from base_model import loss
        from gradcli.checks.spec import CheckSpec, REGISTRY
        def other(x):
            return x
        REGISTRY.append(CheckSpec(name="other", fn=other, file=__file__, line=5, inputs={"x": 1.0}))
    """))
    specs, errors = collect([tmp_path])
    assert errors == []
    assert sorted(s.name for s in specs) == ["loss", "other"]
    sys.modules.pop("base_model", None)


@pytest.mark.parametrize("source, kind, line, snippet", [
    ("import gradcli\nx = 1 / 0\n", "ZeroDivisionError", 2, "x = 1 / 0"),
    ("import gradcli\ndef f(:\n    pass\n", "SyntaxError", 2, "def f(:"),
    ("import gradcli\nimport no_such_module_for_gradcli\n", "ModuleNotFoundError", 2, "import no_such"),
    ("import gradcli\ndef g():\n    raise ValueError('bad\\nsecond line')\ng()\n", "ValueError", 3, "raise ValueError"),
])
def test_an_import_failure_is_one_line_with_the_users_line(tmp_path, source, kind, line, snippet):
    f = tmp_path / "bad.py"
    f.write_text(source)
    specs, errors = collect([f])
    assert specs == []
    (e,) = errors
    assert e["file"].endswith("bad.py")
    assert kind in e["message"] and snippet in e["message"] and f"line {line}" in e["message"]
    assert e["line"] == line
    assert "\n" not in e["message"] and "Traceback" not in e["message"]


def test_sys_exit_on_import_is_an_error_not_an_exit(tmp_path):
    f = tmp_path / "script.py"
    f.write_text("import sys, gradcli\nsys.exit(4)\n")
    specs, errors = collect([f])
    assert specs == [] and "__main__" in errors[0]["message"]


def test_a_failed_import_registers_nothing(tmp_path):
    f = model(tmp_path / "half.py", "loss", body="")
    f.write_text(f.read_text() + "raise RuntimeError('late')\n")
    before = len(REGISTRY)
    specs, errors = collect([f])
    assert specs == [] and len(errors) == 1 and len(REGISTRY) == before


def test_files_that_register_nothing_and_paths_that_do_not_exist(tmp_path):
    f = tmp_path / "empty_model.py"
    f.write_text("import gradcli\n")
    txt = tmp_path / "data.txt"
    txt.write_text("")
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    specs, errors = collect([f, tmp_path / "missing.py", txt, empty])
    assert specs == []
    messages = [e["message"] for e in errors]
    assert any("no such file" in m for m in messages)
    assert any("not a Python file" in m for m in messages)
    assert any("no model files" in m for m in messages)
    assert any("registers no checks" in m for m in messages)


@pytest.mark.parametrize("module, extra", [("torch", "torch"), ("jax.numpy", "jax"), ("jaxlib", "jax"),
                                           ("triton.language", "triton")])
def test_a_framework_that_is_not_installed_is_one_line_naming_the_extra(tmp_path, module, extra):
    # what `import torch` raises where torch is not installed (it is installed here)
    (tmp_path / "needs.py").write_text(
        f"import gradcli\nraise ModuleNotFoundError(\"No module named '{module}'\", name={module!r})\n")
    model(tmp_path / "m.py", "loss")
    specs, errors = collect([tmp_path])
    assert [s.name for s in specs] == ["loss"]  # the other files still run
    top = module.split(".")[0]
    assert [e["message"] for e in errors] == [
        f"cannot import: {top} is not installed; this file needs it: pip install 'gradcli[{extra}]'"]
    assert collecting.needs_extra(errors[0]) == extra


def test_another_missing_module_is_an_ordinary_import_error(tmp_path):
    f = tmp_path / "needs.py"
    f.write_text("import gradcli\nimport no_such_module_for_gradcli\n")
    specs, errors = collect([f])
    assert specs == [] and errors[0]["message"].startswith("cannot import: ModuleNotFoundError")
    assert collecting.needs_extra(errors[0]) is None


def test_pattern_filters_after_collection(tmp_path):
    model(tmp_path / "mlp.py", "mlp_loss", "mlp_bias")
    model(tmp_path / "attn.py", "attention")
    specs, _ = collect([tmp_path], pattern="MLP and not bias")
    assert [s.name for s in specs] == ["mlp_loss"]
    specs, _ = collect([tmp_path], pattern="attn.py")  # the file name matches too, as in pytest
    assert [s.name for s in specs] == ["attention"]


@pytest.mark.parametrize("pattern, expected", [
    ("loss", True), ("LOSS", True), ("grad", False), ("not grad", True), ("loss and not mlp", False),
    ("mlp or grad", True), ("(grad or bias) and loss", False), ("not (grad or bias)", True),
    ("model.py", True), ("mlp and", True), ("((", True),
])
def test_matches(pattern, expected):
    assert matches(pattern, "mlp_loss", "models/model.py") is expected


@pytest.mark.parametrize("source, taken", [
    ('"""Plots what gradcli check reported."""\nX = 1\n', False),  # a docstring naming gradcli
    ("# run `gradcli check models/` first\nX = 1\n", False),
    ('"""\nimport gradcli here is how it is done\n"""\nX = 1\n', False),
    ("import gradclix\n", False),
    ("import gradcli\n", True),
    ("import numpy as np, gradcli\n", True),
    ("import gradcli.api as g\n", True),
    ("try:\n    from gradcli.testing import x\nexcept ImportError:\n    pass\n", True),
    ("import os; import gradcli\n", True),
    ('g = importlib.import_module("gradcli")\n', True),
])
def test_a_folder_takes_files_that_import_gradcli_not_ones_that_name_it(tmp_path, source, taken):
    (tmp_path / "f.py").write_text(source)
    model(tmp_path / "m.py", "loss")
    files, errors = find_files([tmp_path])
    assert sorted(os.path.basename(f) for f in files) == (["f.py", "m.py"] if taken else ["m.py"])
    assert errors == []
    if not taken:  # and the run does not fail with 'registers no checks'
        specs, errors = collect([tmp_path])
        assert [s.name for s in specs] == ["loss"] and errors == []


# --- only regular files, and no more of them than a model file can be -----------------------------------------

def test_links_to_regular_files_in_a_folder_are_followed_and_each_file_is_taken_once(tmp_path):
    # a fifo and a link to /dev/zero in a folder: tests/checks/test_run_ends_cleanly.py, in a process of its own
    m = model(tmp_path / "models" / "m.py", "loss")
    (tmp_path / "elsewhere").mkdir()
    shared = model(tmp_path / "elsewhere" / "shared.py", "shared")
    (tmp_path / "models" / "linked.py").symlink_to(shared)
    (tmp_path / "models" / "again.py").symlink_to(m)  # the same file twice: checked once
    files, errors = find_files([tmp_path / "models"])
    assert [os.path.basename(f) for f in files] == ["again.py", "linked.py"] and errors == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX fifos")
def test_a_fifo_named_on_the_command_line_is_one_error_saying_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "p.py")
    files, errors = find_files([tmp_path / "p.py"])
    assert files == [] and len(errors) == 1 and errors[0]["message"].startswith("not a regular file")


def test_files_past_the_size_bound_are_not_imported_and_the_search_spans_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(collecting, "MAX_SOURCE_BYTES", 4000)
    monkeypatch.setattr(collecting, "_CHUNK", 64)
    padding = "#" * 5000 + "\n"
    big = model(tmp_path / "models" / "big.py", "big", body=padding)  # uses gradcli in its first line
    (tmp_path / "models" / "data.py").write_text(padding + "x = 1\n")  # large, no gradcli: not a model
    (tmp_path / "models" / "late.py").write_text("#" * 61 + "\nimport gradcli\n")  # across a chunk boundary
    files, errors = find_files([tmp_path / "models"])
    assert [os.path.basename(f) for f in files] == ["late.py"]
    assert [(os.path.basename(e["file"]), e["message"].split(",")[0]) for e in errors] == [
        ("big.py", "not imported: 0.0 MiB")]
    assert "larger than any model file gradcli takes" in errors[0]["message"]
    files, errors = find_files([big])
    assert files == [] and "larger than any model file" in errors[0]["message"]


def test_a_folders_walk_reads_no_more_than_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(collecting, "MAX_SOURCE_BYTES", 4000)
    monkeypatch.setattr(collecting, "_CHUNK", 1000)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "huge.py").write_text("#" * 100_000)
    model(tmp_path / "models" / "m.py", "loss")
    read = []
    real_fdopen = os.fdopen

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            data = self.fh.read(n)
            read.append(len(data))
            return data

        def fileno(self):
            return self.fh.fileno()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(collecting.os, "fdopen", lambda *a, **k: Counting(real_fdopen(*a, **k)))
    files, _ = find_files([tmp_path / "models"])
    assert [os.path.basename(f) for f in files] == ["m.py"] and max(read) <= 1000 and sum(read) <= 8000

