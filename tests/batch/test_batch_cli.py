"""``gradcli grad --batch/--points`` through CliRunner, stdout and stderr asserted separately."""
from __future__ import annotations

import os

import numpy as np
import pytest

import gradcli
from gradcli.cli import main
from cli_helpers import PLAIN_ENV, RUNNER, strict_json


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
METHOD_KEYS = {"max_rel_error", "median_rel_error", "agree_fraction", "undefined", "seconds", "status", "worst"}


def grad(*args):
    result = RUNNER.invoke(main, ["grad", *args], env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def test_table_with_every_method_the_worst_points_and_the_verdict():
    r = grad("x**2*sin(y)", "--batch", "2000", "--domain", "x=-1:1", "--domain", "y=0:2")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.stderr == ""
    out = r.stdout
    for word in ("symbolic (ref)", "forward", "reverse", "central", "richardson", "complex_step",
                 "max rel err", "median rel err", "points/s", "worst points", "2000 uniform points", "seed 0"):
        assert word in out, word
    assert "✓ agree" in out and "100%" in out


def test_json_is_one_document_with_the_contract_keys():
    r = grad("log(x) + y**2", "--batch", "1000", "--domain", "x=-1:1, y=0:2", "--json", "--seed", "3")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["points"] == 1000 and doc["device"] == "cpu" and doc["dtype"] == "float64"
    assert doc["seed"] == 3 and doc["domain"] == {"x": [-1.0, 1.0], "y": [0.0, 2.0]}
    assert doc["reference"] == "symbolic" and doc["symbolic"] == {"x": "1/x", "y": "2*y"}
    assert isinstance(doc["points_per_second"], float) and doc["points_per_second"] > 0
    assert doc["status"] == "agree" and 400 < doc["undefined"] < 600
    assert set(doc["methods"]) == {"symbolic", "forward", "reverse", "central", "richardson", "complex_step"}
    for name, m in doc["methods"].items():
        assert METHOD_KEYS <= set(m), name
        assert m["undefined"] == doc["undefined"]
        if name != "symbolic":
            assert m["agree_fraction"] == 1.0
    assert doc["worst"] and {"method", "index", "point", "entry", "got", "ref", "rel_error"} <= set(doc["worst"][0])
    assert set(doc["worst"][0]["point"]) == {"x", "y"}
    assert doc["diagnostics"][0]["op"] == "log"


def test_json_nulls_for_undefined_everywhere():
    r = grad("sqrt(x)", "--batch", "50", "--domain", "x=-2:-1", "--json")
    assert r.exit_code == 3 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["status"] == "undefined" and doc["undefined"] == 50
    assert doc["methods"]["forward"]["max_rel_error"] is None and doc["methods"]["forward"]["agree_fraction"] is None


def test_a_disagreement_exits_1(monkeypatch):
    from gradcli.core.primitives import PRIMITIVES

    cos = PRIMITIVES["cos"]
    monkeypatch.setitem(PRIMITIVES, "cos", cos.__class__(**{**cos.__dict__, "partials": (
        lambda F, a, x: F.sin(x),)}))  # the sign is wrong
    r = grad("cos(x)", "--batch", "300", "--domain", "x=0.1:3")
    assert r.exit_code == 1 and r.stderr == ""
    assert "✗ disagree" in r.stdout and "forward, reverse disagree" in r.stdout
    assert "mismatch" not in r.stderr


def test_points_file_and_out_file(tmp_path):
    pts = tmp_path / "pts.csv"
    pts.write_text("y,x\n1,0.5\n2,1.5\n3,-2\n")
    out = tmp_path / "grads.csv"
    r = grad("x*y + exp(x)", "--points", str(pts), "--out", str(out), "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["points"] == 3 and doc["points_file"] == str(pts) and doc["out"] == str(out)
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    assert out.read_text().splitlines()[0] == "x,y,f,df/dx,df/dy"
    x, y = np.array([0.5, 1.5, -2]), np.array([1.0, 2, 3])
    assert np.allclose(data[:, 3], y + np.exp(x), rtol=1e-15) and np.allclose(data[:, 4], x)
    assert sorted(os.listdir(tmp_path)) == ["grads.csv", "pts.csv"]


def test_npz_out_then_points_float32_and_chunks(tmp_path):
    out = tmp_path / "g.npz"
    r = grad("sin(x)*cosh(y)", "--batch", "500", "--domain", "x=-1:1, y=-1:1", "--out", str(out),
             "--dtype", "float32", "--chunk", "128", "--json")
    assert r.exit_code == 0 and r.stderr == ""
    doc = strict_json(r.stdout)
    assert doc["dtype"] == "float32" and doc["chunk"] == 128
    with np.load(out) as z:
        assert z["points"].shape == (500, 2) and z["grad_x"].shape == (500,)
    r2 = grad("sin(x)*cosh(y)", "--points", str(out), "--json")
    assert r2.exit_code == 0 and strict_json(r2.stdout)["points"] == 500


def test_method_selection_in_batch():
    r = grad("x**3", "--batch", "100", "--domain", "x=-1:1", "-m", "forward,central", "--json")
    doc = strict_json(r.stdout)
    assert r.exit_code == 0 and set(doc["methods"]) == {"forward", "central"}


def test_auto_device_falls_back_to_the_cpu_saying_so(monkeypatch):
    monkeypatch.setattr("gradcli.engines.device.cuda_status", lambda: (False, "no CUDA device"))
    r = grad("x**2", "--batch", "10", "--domain", "x=0:1", "--device", "auto", "--json")
    assert r.exit_code == 0
    assert strict_json(r.stdout)["device"] == "cpu"
    assert r.stderr.startswith("note: ") and "CPU" in r.stderr


def test_cuda_without_cuda_is_exit_2(monkeypatch):
    monkeypatch.setattr("gradcli.engines.device.cuda_status", lambda: (False, "no CUDA device"))
    r = grad("x**2", "--batch", "10", "--domain", "x=0:1", "--device", "cuda")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --device cuda") and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["--batch", "0", "--domain", "x=0:1"], "positive number of points"),
    (["--batch", "-5", "--domain", "x=0:1"], "positive number of points"),
    (["--batch", "10"], "no domain for x"),
    (["--batch", "10", "--domain", "x=0:1", "--domain", "q=0:1"], "q: not a variable"),
    (["--batch", "10", "--domain", "x=0..1"], "NAME=LOW:HIGH"),
    (["--batch", "10", "--domain", "x=2:1"], "LOW <= HIGH"),
    (["--batch", "10", "--domain", "x=0:1", "--domain", "x=0:2"], "twice"),
    (["--batch", "10", "--domain", "x=0:foo(1)"], "--domain x"),
    (["--batch", "10", "--points", "p.csv", "--domain", "x=0:1"], "exclude each other"),
    (["--batch", "10", "--domain", "x=0:1", "--at", "x=1"], "--at gives one point"),
    (["--domain", "x=0:1"], "--domain only applies in batch mode"),
    (["--at", "x=1", "--out", "g.npz"], "--out only applies in batch mode"),
    (["--batch", "10", "--domain", "x=0:1", "--chunk", "0"], "--chunk"),
    (["--batch", "10", "--domain", "x=0:1", "--dtype", "float16"], "unknown dtype"),
    (["--batch", "10", "--domain", "x=0:1", "--device", "tpu"], "unknown device"),
    (["--batch", "10", "--domain", "x=0:1", "--out", "g.txt"], "--out g.txt: unknown file type"),
    (["--batch", "10", "--domain", "x=0:1", "--method", "nope"], "unknown method"),
    (["--points", "missing.csv"], "no such file"),
    (["--points", "p.json"], "unknown file type"),
    (["--points", "p.csv", "--seed", "2"], "--seed only goes with --batch"),
])
def test_bad_input_is_one_error_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.csv").write_text("x\n1\n")
    for as_json in (False, True):
        r = grad("x**2", *args, *(["--json"] if as_json else []))
        assert r.exit_code == 2
        assert r.stderr.startswith("error: ") and message in r.stderr.splitlines()[0], r.stderr
        if as_json:
            doc = strict_json(r.stdout)
            assert doc["status"] == "error" and message in doc["error"]
        else:
            assert r.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["p.csv"]  # nothing written on bad input


@pytest.mark.parametrize("content,message", [
    ("x,y\n1,2\n", "not a variable|no column"),
    ("a\n1\n", "no column for x"),
    ("x\n1\nabc\n", "malformed"),
    ("x\n", "no points"),
])
def test_bad_points_files(tmp_path, content, message):
    p = tmp_path / "p.csv"
    p.write_text(content)
    r = grad("x**2 + 1", "--points", str(p))
    if "not a variable" in message:  # extra columns are ignored: this one is fine
        assert r.exit_code == 0
        return
    assert r.exit_code == 2 and r.stdout == "" and message in r.stderr


def test_a_bad_expression_in_batch_mode_keeps_the_caret():
    r = grad("2x", "--batch", "10", "--domain", "x=0:1")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "did you mean 2*x" in r.stderr and "^" in r.stderr


def test_no_progress_bar_without_a_terminal():
    r = grad("x", "--batch", "3000", "--domain", "x=0:1", "--chunk", "500")
    assert r.exit_code == 0 and r.stderr == ""


def test_points_csv_ignores_other_columns_and_a_byte_order_mark(tmp_path):
    p = tmp_path / "p.csv"
    p.write_bytes("\ufeffx,label,y\n1,foo,2\n3,bar,4\n".encode("utf-8"))
    r = grad("x*y", "--points", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert strict_json(r.stdout)["points"] == 2


def test_a_corrupt_npz_and_an_unsamplable_domain_are_exit_2(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not a zip file")
    r = grad("x*y", "--points", str(bad))
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and "cannot read" in r.stderr
    r = grad("x", "--batch", "10", "--domain", "x=-1e308:1e308")
    assert r.exit_code == 2 and "overflows" in r.stderr


def test_a_constant_expression_with_a_points_file_says_it_has_no_variables(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("x,y\n1,2\n")
    r = grad("2", "--points", str(p))
    assert r.exit_code == 2 and "no variables" in r.stderr


# ---- --out file mode, --engine --------------------------------------------------------------------

@pytest.mark.parametrize("ext", ["csv", "npz"])
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_out_files_get_the_users_normal_mode(tmp_path, ext, umask):
    out = tmp_path / f"g.{ext}"
    old = os.umask(umask)
    try:
        r = grad("x*y", "--batch", "20", "--domain", "x=0:1, y=0:1", "--out", str(out), "--json")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left behind


def test_the_engine_gives_the_same_verdict_and_numbers(tmp_path):
    docs = {}
    for engine in ("numpy", None):
        out = tmp_path / f"{engine}.npz"
        args = ["x**2*sin(y) + exp(x*y)", "--batch", "300", "--domain", "x=-1:1, y=0:2", "--out", str(out),
                "--json"] + (["--engine", engine] if engine else [])
        r = grad(*args)
        assert r.exit_code == 0 and r.stderr == ""
        docs[engine] = strict_json(r.stdout)
        with np.load(out) as z:
            docs[engine]["grad_x"] = z["grad_x"].tobytes()
    assert docs["numpy"]["status"] == docs[None]["status"] == "agree"
    assert docs["numpy"]["grad_x"] == docs[None]["grad_x"]  # 300 points: the rule picks numpy


@pytest.mark.parametrize("args,message", [
    (["--engine", "fortran"], "unknown engine 'fortran'"),
    (["--engine", "cuda", "--device", "cpu"], "--engine cuda runs on the GPU"),
    (["--engine", "numpy", "--device", "cuda"], "--engine numpy runs on the CPU"),
])
def test_bad_engine_is_exit_2(args, message):
    r = grad("x**2", "--batch", "10", "--domain", "x=0:1", *args)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and message in r.stderr


def test_engine_cuda_without_cuda_is_exit_2(monkeypatch):
    monkeypatch.setattr("gradcli.engines.device.cuda_status", lambda: (False, "no CUDA device"))
    r = grad("x**2", "--batch", "10", "--domain", "x=0:1", "--engine", "cuda")
    assert r.exit_code == 2 and r.stderr.startswith("error: --engine cuda: CUDA is not available")


def test_engine_only_applies_in_batch_mode():
    r = grad("x**2", "--at", "x=1", "--engine", "numpy")
    assert r.exit_code == 2 and "--engine only applies in batch mode" in r.stderr


def test_grad_batch_takes_an_engine_and_checks_it():
    kw = dict(n=200, domain={"x": (0.5, 2)}, seed=1)
    a, b = gradcli.grad_batch("log(x)*x", engine="numpy", **kw), gradcli.grad_batch("log(x)*x", **kw)
    assert a.status == b.status == "agree"
    assert a.methods["reverse"].max_rel_error == b.methods["reverse"].max_rel_error
    for engine, device in (("cuda", "cpu"), ("numba", "cuda"), ("gpu", None)):
        with pytest.raises(gradcli.BadInput):
            gradcli.grad_batch("log(x)", engine=engine, device=device, **kw)
