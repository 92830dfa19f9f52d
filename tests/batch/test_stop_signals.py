"""A stop signal (SIGINT, SIGTERM, SIGHUP) ends every command with one line on stderr and 128 + the
signal (130, 143, 129), never click's "Aborted!" and 1 or a traceback; ``--out`` leaves no temporary file
and an existing target untouched. Real processes, real signals: some from the test, while the run
writes its output; some sent by the process to itself the moment a named function is entered, so that
they land in a chosen phase of the run (during the sympy derivative, while the .npz is zipped)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from cli_helpers import LINE, finish, start

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")

STATUS = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}

def temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


@pytest.mark.parametrize("ext", ["csv", "npz"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_out_is_written_removes_the_temporary_and_keeps_the_old_file(tmp_path, sig, ext):
    target = tmp_path / f"big.{ext}"
    target.write_text("the previous run's output\n")
    proc = start(["grad", "x*sin(y)", "--batch", 3_000_000, "--domain", "x=0:1, y=0:1", "--out", target.name],
                 tmp_path)
    deadline = time.monotonic() + 300
    while not temporaries(tmp_path):  # the run has begun writing (the file beside the target)
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the temporary file never appeared"
        time.sleep(0.02)
    proc.send_signal(getattr(signal, sig))
    code, out, err = finish(proc)
    assert code == STATUS[sig]
    assert err.splitlines() == [LINE[sig]]
    assert out == ""
    assert sorted(os.listdir(tmp_path)) == [target.name]
    assert target.read_text() == "the previous run's output\n"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_the_npz_is_zipped_leaves_nothing_behind(tmp_path, sig):
    target = tmp_path / "out.npz"
    target.write_bytes(b"old")
    # ZipFile's constructor runs once the zip's temporary file exists and the memory maps are full
    proc = start(["grad", "x*y", "--batch", 5000, "--domain", "x=0:1, y=0:1", "--out", target.name],
                 tmp_path, sig, hook="zipfile:__init__")
    code, out, err = finish(proc)
    assert code == STATUS[sig] and err.splitlines() == [LINE[sig]]
    assert sorted(os.listdir(tmp_path)) == ["out.npz"] and target.read_bytes() == b"old"


COMMANDS = {
    "grad": (["grad", "x**2*sin(y)", "--at", "x=1, y=2"], "gradcli.verdict.point:compare_point"),
    "grad in sympy": (["grad", "x**2*sin(y)", "--at", "x=1, y=2"], "sympy:diff"),
    "grad --json": (["grad", "x**2*sin(y)", "--at", "x=1, y=2", "--json"], "sympy:diff"),
    "batch": (["grad", "x*y", "--batch", 100, "--domain", "x=0:1, y=0:1"], "gradcli.batch.compare:run_batch"),
    "hessian": (["hessian", "x**2*y", "--at", "x=1, y=2"], "gradcli.verdict.hessian:compare_hessian"),
    "explain": (["explain", "x**2*y", "--at", "x=1, y=2"], "gradcli.explain:explain"),
    "plot": (["plot", "sin(x)", "--x", "0:1", "--json"], "gradcli.plotting.data:plot_data"),
    "plot in sympy": (["plot", "sin(x)", "--x", "0:1", "--json"], "sympy:diff"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_ctrl_c_in_any_command_exits_130_with_one_line(tmp_path, command):
    args, hook = COMMANDS[command]
    code, out, err = finish(start(args, tmp_path, "SIGINT", hook))
    assert code == 130
    assert err.splitlines() == [LINE["SIGINT"]]
    if "--json" in args:  # stdout still holds its one document, which says the run stopped
        assert json.loads(out) == {"status": "error", "error": LINE["SIGINT"], "interrupted": True}
    else:
        assert out == ""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_in_a_point_command(tmp_path, sig):
    code, out, err = finish(start(COMMANDS["grad in sympy"][0], tmp_path, sig, "sympy:diff"))
    assert code == STATUS[sig] and err.splitlines() == [LINE[sig]]


SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "gradcli", "schemas")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("hook", ["gradcli.batch.compare:run_batch", "gradcli.cli:load_command"],
                         ids=["running", "loading the command"])
def test_a_stopped_batch_with_json_prints_one_document_that_says_so(tmp_path, sig, hook):
    args = ["grad", "x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--out", "o.csv", "--json"]
    code, out, err = finish(start(args, tmp_path, sig, hook))
    assert code == STATUS[sig] and err.splitlines() == [LINE[sig]]
    doc = json.loads(out)
    assert doc == {"status": "error", "error": LINE[sig], "interrupted": True}
    assert os.listdir(tmp_path) == []
    jsonschema = pytest.importorskip("jsonschema")
    for name in ("grad-batch", "error"):
        with open(os.path.join(SCHEMAS, f"{name}.json"), encoding="utf-8") as fh:
            jsonschema.validate(doc, json.load(fh))


def test_a_signal_the_caller_ignores_stays_ignored(tmp_path):
    # nohup: a SIGHUP when the terminal closes must not end the run
    proc = start(["grad", "x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--out", "o.csv"], tmp_path,
                 "SIGHUP", "gradcli.batch.compare:run_batch", ignored=["SIGHUP"])
    code, out, err = finish(proc)
    assert code == 0, err
    assert "agree" in out and sorted(os.listdir(tmp_path)) == ["o.csv"]
