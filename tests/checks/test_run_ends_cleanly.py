"""A run of ``gradcli check`` loses nothing: ``--junit`` never replaces an input, a folder or a device, and
a model's ``sys.exit()`` (or any BaseException) is that check's error, not the end of the run; only the
user's Ctrl-C stops it (exit 130, with what ran reported). What a model process that ends, hangs or
writes around sys.stdout costs, and SIGTERM and SIGHUP, are in test_isolation.py."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from cli_helpers import LINE, PLACES, check, finish, model, placed, start

GOOD = '''
import numpy as np
import gradcli

@gradcli.check(x=np.array([0.5, -1.0, 2.0]))
def cube(x):
    return np.sum(x ** 3)

@cube.grad
def cube_grad(x):
    return 3 * x ** 2
'''

WRONG = '''
@gradcli.check(x=np.array([0.5, -1.0, 2.0]))
def square(x):
    return np.sum(x ** 2)

@square.grad
def square_grad(x):
    return 2.2 * x
'''


def junit_cases(xml_path) -> dict:
    return {c.get("name"): c for c in ET.parse(xml_path).getroot().iter("testcase")}


# --- --junit never replaces what it must not -------------------------------------------------------------

def test_junit_naming_the_model_file_is_refused_before_anything_runs(tmp_path):
    m = model(tmp_path / "m.py", GOOD, "print('imported')")
    source = m.read_text()
    r = check(m, "--junit", m)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --junit") and "files being checked" in r.stderr
    assert len(r.stderr.splitlines()) == 1 and "imported" not in r.stderr  # not even imported
    assert m.read_text() == source


def test_junit_naming_a_file_collected_from_a_folder_is_refused(tmp_path):
    (tmp_path / "models").mkdir()
    m = model(tmp_path / "models" / "m.py", GOOD)
    source = m.read_text()
    r = check(tmp_path / "models", "--junit", m)
    assert r.exit_code == 2 and "files being checked" in r.stderr
    assert m.read_text() == source


def test_junit_through_a_link_or_a_hard_link_to_the_model_is_refused(tmp_path):
    m = model(tmp_path / "m.py", GOOD)
    source = m.read_text()
    (tmp_path / "soft.xml").symlink_to(m)
    os.link(m, tmp_path / "hard.xml")
    for target in ("soft.xml", "hard.xml"):
        r = check(m, "--junit", tmp_path / target)
        assert r.exit_code == 2 and "files being checked" in r.stderr, target
    assert m.read_text() == source and (tmp_path / "soft.xml").is_symlink()


def test_junit_naming_a_folder_a_device_a_fifo_or_a_link_loop_is_refused(tmp_path):
    m = model(tmp_path / "m.py", GOOD)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop.xml").symlink_to(tmp_path / "loop.xml")
    for target in (tmp_path, "/dev/null", tmp_path / "fifo", tmp_path / "loop.xml"):
        r = check(m, "--junit", target)
        assert r.exit_code == 2 and r.stderr.startswith("error: --junit"), target
        assert len(r.stderr.splitlines()) == 1
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)


def test_junit_through_a_symlink_writes_the_target_and_keeps_the_link(tmp_path):
    m = model(tmp_path / "m.py", GOOD)
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "real.xml"
    target.write_text("old report")
    link = tmp_path / "latest.xml"
    link.symlink_to(target)
    r = check(m, "--junit", link)
    assert r.exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert set(junit_cases(target)) == {"cube"}
    assert sorted(os.listdir(tmp_path / "reports")) == ["real.xml"]  # no temporary file left


def test_junit_file_gets_the_users_umask(tmp_path):
    m = model(tmp_path / "m.py", GOOD)
    old = os.umask(0o027)
    try:
        r = check(m, "--junit", tmp_path / "r.xml")
    finally:
        os.umask(old)
    assert r.exit_code == 0 and stat.S_IMODE(os.stat(tmp_path / "r.xml").st_mode) == 0o640


# --- a model cannot end the run --------------------------------------------------------------------------

RAISES = {"sys.exit(0)": "SystemExit", "raise KeyboardInterrupt": "KeyboardInterrupt",
          "raise GeneratorExit": "GeneratorExit", "raise Custom('boom')": "Custom: boom"}
PRELUDE = "import sys\n\nclass Custom(BaseException):\n    pass\n"


@pytest.mark.parametrize("where", list(PLACES))
@pytest.mark.parametrize("stmt", list(RAISES))
def test_a_base_exception_in_user_code_is_that_checks_error(tmp_path, where, stmt):
    body = placed(where, stmt)
    m = model(tmp_path / "m.py", GOOD, WRONG, PRELUDE, body)
    out = tmp_path / "r.xml"
    out.write_text("stale report from an earlier run")
    r = check(m, "--json", "--junit", out)
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses == {"cube": "pass", "square": "fail", "quits": "error"}
    quits = next(c for c in doc["checks"] if c["name"] == "quits")
    assert RAISES[stmt] in quits["message"]
    cases = junit_cases(out)
    assert set(cases) == {"cube", "square", "quits"} and cases["quits"].find("error") is not None


@pytest.mark.parametrize("stmt", list(RAISES))
def test_a_base_exception_at_import_is_that_files_error(tmp_path, stmt):
    good = model(tmp_path / "good.py", GOOD, WRONG)
    bad = model(tmp_path / "bad.py", "import gradcli", PRELUDE, stmt)
    out = tmp_path / "r.xml"
    r = check(good, bad, "--junit", out)
    assert r.exit_code == 2
    named = "sys.exit(0)" if stmt == "sys.exit(0)" else RAISES[stmt]
    assert "bad.py: cannot import" in r.stderr and named in r.stderr and "Traceback" not in r.stderr
    assert "cube" in r.stdout and "square" in r.stdout and "1 passed, 1 failed" in r.stdout
    assert {"cube", "square"} <= set(junit_cases(out))


# --- the user's Ctrl-C stops the run ---------------------------------------------------------------------

SLOW = '''
import os, time
import numpy as np
import gradcli

@gradcli.check(x=np.array([1.0, 2.0]))
def first(x):
    return np.sum(x ** 2)

@gradcli.check(x=np.array([1.0, 2.0]))
def slow(x):
    open(os.environ["GRADCLI_TEST_MARK"], "w").close()
    time.sleep(60)
    return np.sum(x ** 2)

@gradcli.check(x=np.array([1.0, 2.0]))
def never(x):
    return np.sum(x ** 2)
'''


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("as_json", [False, True])
def test_sigint_stops_the_run_reports_what_ran_and_exits_130(tmp_path, as_json):
    m = model(tmp_path / "slow_model.py", SLOW)
    mark, out = tmp_path / "started", tmp_path / "r.xml"
    out.write_text("stale report from an earlier run")
    env = {**os.environ, "GRADCLI_TEST_MARK": str(mark), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gradcli", "check", str(m), "--junit", str(out)]
                            + (["--json"] if as_json else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    if as_json:
        doc = json.loads(stdout)
        assert doc["interrupted"] is True and [c["name"] for c in doc["checks"]] == ["first"]
        assert doc["checks"][0]["status"] == "pass"
    else:
        assert "first" in stdout and "never" not in stdout and "interrupted after 1 of 3 checks" in stdout
    assert "interrupted: 1 of 3 checks ran" in stderr and "Traceback" not in stderr
    cases = junit_cases(out)  # what ran, and that the run stopped: CI must not pass it as complete
    assert set(cases) == {"first", "gradcli check"} and cases["gradcli check"].find("error").get("type") == "interrupted"


# --- a run stopped before it began still reports, as itself -------------------------------------------------

#: Where the stop lands: while the command is imported, while --junit is checked against the folder's
#: model files, once it has been, and as the model files start.
EARLY = ["gradcli.cli:load_command", "gradcli.checks.collect:find_files", "gradcli.checks.config:load_defaults",
         "gradcli.checks.process.isolated:run_files"]


def stale_gradcli_report() -> str:
    from gradcli.checks.result import CheckReport, CheckResult
    from gradcli.render.junit import junit_xml

    return junit_xml(CheckReport(checks=[CheckResult(name="cube", file="m.py", line=4, kind="grad", status="pass")]))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("stale", ["text", "gradcli report"])
@pytest.mark.parametrize("hook", EARLY, ids=lambda h: h.split(":")[1])
def test_a_run_stopped_before_any_check_ran_says_so_in_json_and_junit(tmp_path, hook, stale):
    (tmp_path / "models").mkdir()
    model(tmp_path / "models" / "m.py", GOOD)
    out = tmp_path / "r.xml"
    out.write_text("stale report from an earlier run" if stale == "text" else stale_gradcli_report())
    code, stdout, stderr = finish(start(["check", "models", "--junit", out, "--json"], tmp_path, "SIGTERM", hook))
    assert code == 143, stderr
    doc = json.loads(stdout)
    assert doc["interrupted"] is True and doc["checks"] == []
    assert "interrupted: no model file was checked" in stderr and "0 of 0" not in stderr, stderr
    cases = junit_cases(out)
    assert set(cases) == {"gradcli check"} and cases["gradcli check"].find("error").get("type") == "interrupted"
    assert sorted(os.listdir(tmp_path)) == ["models", "r.xml"]  # no temporary file left


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stop_before_junit_was_checked_against_the_model_files_leaves_a_model_alone(tmp_path):
    (tmp_path / "models").mkdir()
    m = model(tmp_path / "models" / "m.py", GOOD)
    source = m.read_text()
    os.link(m, tmp_path / "hard.xml")  # the folder's model under another name: never to be replaced
    args = ["check", "models", "--junit", "hard.xml", "--json"]
    code, stdout, _ = finish(start(args, tmp_path, "SIGTERM", "gradcli.checks.collect:find_files"))
    assert code == 143 and json.loads(stdout)["interrupted"] is True
    assert m.read_text() == source and os.path.samefile(m, tmp_path / "hard.xml")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stop_while_the_command_loads_ends_its_help_as_stopped(tmp_path):
    code, stdout, stderr = finish(start(["check", "--help"], tmp_path, "SIGTERM", "gradcli.cli:load_command"))
    assert code == 143 and stderr.splitlines()[-1] == LINE["SIGTERM"]


# --- a folder's fifos and devices cannot hang the run or fill its memory ----------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX fifos and devices")
def test_a_fifo_and_a_link_to_dev_zero_in_a_folder_are_not_read(tmp_path):
    import resource

    (tmp_path / "models").mkdir()
    model(tmp_path / "models" / "m.py", GOOD)
    os.mkfifo(tmp_path / "models" / "p.py")  # read, it blocks forever
    (tmp_path / "models" / "z.py").symlink_to("/dev/zero")  # read, it never ends

    def bounded():  # were /dev/zero read, a MemoryError well before this machine's memory runs out
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    r = subprocess.run([sys.executable, "-m", "gradcli", "check", "models", "--json"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, preexec_fn=bounded)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [c["name"] for c in doc["checks"]] == ["cube"] and "errors" not in doc
    assert stat.S_ISFIFO(os.lstat(tmp_path / "models" / "p.py").st_mode)

