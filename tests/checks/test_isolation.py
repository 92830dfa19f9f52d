"""``gradcli check`` survives whatever a model does: each model file runs in a process of its own.

A model process that ends (``os._exit``, SIGKILL, a segfault) costs only the check that was running and
the rest of its file; a check past ``--timeout`` is an error at the line it was stuck on, and one that
does not answer is killed while the rest of its file still runs; output written around ``sys.stdout``
never reaches stdout; SIGINT, SIGTERM and SIGHUP end the model processes and report what ran. The
Python API stays in the caller's process. Real processes and real signals throughout; the only time
assertions are generous "it does not hang" limits.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from gradcli.checks.process import isolated
from gradcli.checks.process.worker import GRACE_S
from cli_helpers import check, model, placed

pytestmark = pytest.mark.skipif(not isolated.AVAILABLE, reason="model processes need os.fork (POSIX)")

GOOD = '''
import os, signal, sys, ctypes, time
import numpy as np
import gradcli

def note_pid(name):
    folder = os.environ.get("GRADCLI_TEST_DIR")
    if folder:
        with open(os.path.join(folder, name), "w") as fh:
            fh.write(str(os.getpid()))

@gradcli.check(x=np.array([0.5, -1.0, 2.0]))
def cube(x):
    note_pid("cube")
    return np.sum(x ** 3)

@cube.grad
def cube_grad(x):
    return 3 * x ** 2
'''

AFTER = '''
@gradcli.check(x=np.array([1.0, 2.0]))
def after(x):
    note_pid("after")
    return np.sum(x ** 2)
'''

OTHER = '''
import numpy as np
import gradcli

@gradcli.check(x=np.array([1.0, 3.0]))
def other(x):
    return np.sum(np.sin(x))
'''


def gradcli_process(*args, cwd, env=None, timeout=120):
    """``python -m gradcli check ARGS`` as its own process, stdout and stderr apart (real file descriptors)."""
    return subprocess.run([sys.executable, "-m", "gradcli", "check", *map(str, args)], cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def line_of(path, text) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def junit_cases(xml_path) -> dict:
    return {c.get("name"): c for c in ET.parse(xml_path).getroot().iter("testcase")}


def by_name(result) -> dict:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie left to a container's init that never reaps is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_for(path, proc=None, limit=120.0):
    deadline = time.monotonic() + limit
    while not path.exists():
        assert proc is None or proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


# --- one model process per file ------------------------------------------------------------------------

def test_each_file_gets_one_model_process_and_gradcli_none(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADCLI_TEST_DIR", str(tmp_path))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    model(tmp_path / "a" / "m.py", GOOD, AFTER)
    model(tmp_path / "b" / "m.py", GOOD.replace('note_pid("cube")', 'note_pid("cube_b")'))
    r = check(tmp_path / "a" / "m.py", tmp_path / "b" / "m.py", "--json")
    assert r.exit_code == 0, r.output
    pids = {name: int((tmp_path / name).read_text()) for name in ("cube", "after", "cube_b")}
    assert pids["cube"] == pids["after"]  # one process for a file's checks, not one per check
    assert pids["cube_b"] != pids["cube"]
    assert os.getpid() not in pids.values()
    assert not any(alive(p) for p in pids.values())


# --- the model process ends: that check and the rest of its file are errors ------------------------------

ENDINGS = {
    "os._exit(0)": "the model process exited with status 0 during this check",
    "os._exit(3)": "the model process exited with status 3 during this check",
    "os.kill(os.getpid(), signal.SIGKILL)": "the model process was killed by signal 9 (SIGKILL) during this check",
    "ctypes.string_at(0)": "the model process was killed by signal 11 (SIGSEGV) during this check",
}


@pytest.mark.parametrize("where", ['function', 'gradient', 'vjp'])
@pytest.mark.parametrize("stmt", list(ENDINGS))
def test_a_model_process_that_ends_costs_only_that_check_and_the_rest_of_its_file(tmp_path, where, stmt):
    m = model(tmp_path / "m.py", GOOD, placed(where, stmt), AFTER)
    other = model(tmp_path / "other.py", OTHER)
    out = tmp_path / "r.xml"
    out.write_text("stale report from an earlier run")
    r = check(m.name, other.name, "--json", "--junit", out, cwd=tmp_path)
    assert r.exit_code == 1, r.output
    checks = by_name(r)
    assert {k: c["status"] for k, c in checks.items()} == {"cube": "pass", "quits": "error", "after": "error",
                                                            "other": "pass"}
    assert checks["quits"]["message"].startswith(ENDINGS[stmt]), checks["quits"]["message"]
    assert checks["after"]["message"] == f"not run: {ENDINGS[stmt][:-len(' during this check')]} during check 'quits'"
    if "SIGSEGV" in ENDINGS[stmt]:  # faulthandler's stack names the model's line
        assert f"at m.py:{line_of(m, stmt)} ({stmt})" in checks["quits"]["message"]
        assert "Segmentation fault" in checks["quits"]["traceback"]
    cases = junit_cases(out)
    assert set(cases) == set(checks)
    assert cases["quits"].find("error") is not None and cases["after"].find("error") is not None
    assert cases["cube"].find("error") is None


@pytest.mark.parametrize("stmt", list(ENDINGS))
def test_a_model_process_that_ends_at_import_is_that_files_error(tmp_path, stmt):
    good = model(tmp_path / "good.py", GOOD)
    bad = model(tmp_path / "bad.py", "import os, signal, ctypes", "import gradcli", stmt)
    out = tmp_path / "r.xml"
    r = check(good.name, bad.name, "--junit", out, cwd=tmp_path)
    assert r.exit_code == 2, r.output
    what = ENDINGS[stmt][len("the model process "):-len(" during this check")]
    assert r.stderr.startswith(f"error: bad.py: cannot import: the model process {what} while importing the file")
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    assert "cube" in r.stdout and "1 passed" in r.stdout and "1 file error" in r.stdout
    assert {"cube", "bad.py"} == set(junit_cases(out))


# --- the time limit ---------------------------------------------------------------------------------------

LOOPS = '''
@gradcli.check(x=np.array([1.0, 2.0]))
def spins(x):
    n = 0
    while True:
        n += 1
    return np.sum(x)
'''


@pytest.mark.parametrize("where", ["option", "pyproject"])
def test_a_check_past_its_time_limit_is_an_error_at_the_line_it_was_stuck_on(tmp_path, where):
    m = model(tmp_path / "m.py", GOOD, LOOPS, AFTER)
    args = ["--timeout", "1"] if where == "option" else []
    if where == "pyproject":
        (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\ntimeout = 1\n")
    started = time.monotonic()
    r = check("m.py", "--json", *args, cwd=tmp_path)
    assert time.monotonic() - started < 60  # 1 s, not forever
    assert r.exit_code == 1, r.output
    checks = by_name(r)
    assert {k: c["status"] for k, c in checks.items()} == {"cube": "pass", "spins": "error", "after": "pass"}
    line = line_of(m, "n += 1")
    message = checks["spins"]["message"]
    assert message.startswith((f"timed out: still running after 1 s, at m.py:{line} (n += 1);",
                               f"timed out: still running after 1 s, at m.py:{line - 1} (while True:);")), message
    assert "--timeout" in message
    assert "TimedOut" in checks["spins"]["traceback"] and "m.py" in checks["spins"]["traceback"]


STUCK = '''
@gradcli.check(x=np.array([1.0, 2.0]))
def blocks_the_alarm(x):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # as a C extension that never returns
    time.sleep(600)
    return np.sum(x)

@gradcli.check(x=np.array([1.0, 2.0]))
def swallows_the_alarm(x):
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass
'''


def test_a_check_that_does_not_answer_the_time_limit_is_killed_and_the_rest_of_the_file_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADCLI_TEST_DIR", str(tmp_path))
    m = model(tmp_path / "m.py", GOOD, STUCK, AFTER)
    out = tmp_path / "r.xml"
    started = time.monotonic()
    r = check(m, "--json", "--timeout", "1", "--junit", out)
    assert time.monotonic() - started < 2 * (1 + GRACE_S) + 60
    assert r.exit_code == 1, r.output
    checks = by_name(r)
    assert {k: c["status"] for k, c in checks.items()} == {"cube": "pass", "blocks_the_alarm": "error",
                                                            "swallows_the_alarm": "error", "after": "pass"}
    for name in ("blocks_the_alarm", "swallows_the_alarm"):
        message = checks[name]["message"]
        assert message.startswith("timed out: still running after 1 s and not answering"), message
        assert "so its process was killed" in message
    # the checks after a killed one ran in a new process
    assert int((tmp_path / "after").read_text()) != int((tmp_path / "cube").read_text())
    assert set(junit_cases(out)) == set(checks)


def test_an_import_past_the_time_limit_is_that_files_error(tmp_path):
    good = model(tmp_path / "good.py", GOOD)
    slow = model(tmp_path / "slow.py", "import gradcli", "while True:", "    pass")
    started = time.monotonic()
    r = check(good.name, slow.name, "--timeout", "1", cwd=tmp_path)
    assert time.monotonic() - started < 60
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: slow.py: cannot import: still running after 1 s, at slow.py:")
    assert len(r.stderr.splitlines()) == 1
    assert "1 passed" in r.stdout


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_timeout_option_must_be_a_positive_number(tmp_path, value):
    m = model(tmp_path / "m.py", GOOD)
    r = check(m, "--timeout", value)
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", "error: --timeout: expected a positive number of seconds\n")
    r = check(m, "--timeout", value, "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["status"] == "error"


@pytest.mark.parametrize("value", ["0", "-2.5", '"60"', "true", "[1]"])
def test_timeout_key_must_be_a_positive_number(tmp_path, value):
    model(tmp_path / "m.py", GOOD)
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradcli]\ntimeout = {value}\n")
    r = check("m.py", cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "pyproject.toml" in r.stderr
    assert "timeout must be a positive number of seconds" in r.stderr


# --- output around sys.stdout -----------------------------------------------------------------------------

NOISY = '''
import atexit, ctypes, os, subprocess, sys, threading, time
import numpy as np
import gradcli

os.write(1, b"IMPORT-FD1\\n")
print("IMPORT-DUNDER", file=sys.__stdout__, flush=True)
subprocess.run([sys.executable, "-c", "print('IMPORT-SUBPROCESS')"], check=True)
atexit.register(lambda: os.write(1, b"ATEXIT\\n"))


def late():
    while True:
        time.sleep(0.01)
        os.write(1, b"LATE-THREAD\\n")


STARTED = []


@gradcli.check(x=np.array([1.0, 2.0]))
def noisy(x):
    os.write(1, b"CHECK-FD1\\n")
    print("CHECK-DUNDER", file=sys.__stdout__, flush=True)
    libc = ctypes.CDLL(None)
    libc.puts(b"CHECK-C-STDIO")
    libc.fflush(None)
    if not STARTED:  # the check calls the function many times; one thread and one process are enough
        STARTED.append(threading.Thread(target=late, daemon=True))
        STARTED[0].start()
        later = subprocess.Popen([sys.executable, "-c", "import os, time; time.sleep(30); os.write(1, b'GRANDCHILD')"])
        with open(os.environ["GRADCLI_TEST_PID"], "w") as fh:
            fh.write(str(later.pid))
    return np.sum(x ** 2)
'''
MARKERS = ["IMPORT-FD1", "IMPORT-DUNDER", "IMPORT-SUBPROCESS", "CHECK-FD1", "CHECK-DUNDER", "CHECK-C-STDIO"]


@pytest.mark.parametrize("as_json", [True, False])
def test_output_around_sys_stdout_goes_to_stderr_never_to_stdout(tmp_path, as_json):
    m = model(tmp_path / "noisy.py", NOISY)
    pid_file = tmp_path / "grandchild.pid"
    r = gradcli_process(m, *(["--json"] if as_json else []), cwd=tmp_path, env={"GRADCLI_TEST_PID": str(pid_file)})
    assert r.returncode == 0, (r.stdout, r.stderr)
    for marker in MARKERS + ["LATE-THREAD", "ATEXIT"]:
        assert marker not in r.stdout
    if as_json:
        doc = json.loads(r.stdout)  # exactly one document
        assert [c["status"] for c in doc["checks"]] == ["pass"]
    else:
        assert "1 passed" in r.stdout
    for marker in MARKERS:
        assert marker in r.stderr, marker
    time.sleep(0.2)
    assert not alive(int(pid_file.read_text()))  # what the model started ended with its file


# --- stop signals end the model processes and report what ran -------------------------------------------

SLOW = '''
import os, subprocess, sys, time
import numpy as np
import gradcli

@gradcli.check(x=np.array([1.0, 2.0]))
def first(x):
    return np.sum(x ** 2)

@gradcli.check(x=np.array([1.0, 2.0]))
def slow(x):
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    mark = os.environ["GRADCLI_TEST_MARK"]
    with open(mark + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} {helper.pid}")
    os.rename(mark + ".tmp", mark)
    time.sleep(120)
    return np.sum(x ** 2)

@gradcli.check(x=np.array([1.0, 2.0]))
def never(x):
    return np.sum(x ** 2)
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_ends_the_model_processes_and_reports_what_ran(tmp_path, signum):
    m = model(tmp_path / "slow_model.py", SLOW)
    later = model(tmp_path / "later.py", OTHER)
    mark, out = tmp_path / "started", tmp_path / "r.xml"
    out.write_text("stale report from an earlier run")
    env = {**os.environ, "GRADCLI_TEST_MARK": str(mark), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gradcli", "check", str(m), str(later), "--json", "--junit",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)
    try:
        wait_for(mark, proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, (stdout, stderr)
    doc = json.loads(stdout)
    assert doc["interrupted"] is True and [(c["name"], c["status"]) for c in doc["checks"]] == [("first", "pass")]
    # later.py was never imported: its checks are in no count, and the line says a file was not reached
    assert "interrupted: 1 of the 3 checks registered so far ran; 1 model file not reached" in stderr, stderr
    assert "Traceback" not in stderr
    cases = junit_cases(out)  # what ran, and that the run stopped: CI must not pass it as complete
    assert set(cases) == {"first", "gradcli check"} and cases["gradcli check"].find("error").get("type") == "interrupted"
    model_pid, helper_pid = map(int, mark.read_text().split())
    time.sleep(0.2)
    assert not alive(model_pid) and not alive(helper_pid)


# --- ended model processes are reaped as the run goes -------------------------------------------------------

COUNTS_ZOMBIES = '''
import os
import numpy as np
import gradcli

def zombie_siblings():
    """Ended children of gradcli (this process's parent) that no one has reaped yet."""
    count = 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        count += fields[0] == "Z" and int(fields[1]) == os.getppid()
    return count

@gradcli.check(x=np.array([1.0, 2.0]))
def counts(x):
    with open(os.path.join(os.environ["GRADCLI_TEST_DIR"], os.path.basename(__file__) + ".txt"), "w") as fh:
        fh.write(str(zombie_siblings()))
    return np.sum(x ** 2)
'''


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="counts zombies in /proc")
def test_ended_model_processes_are_reaped_as_the_run_goes_not_at_its_end(tmp_path):
    from gradcli.checks.process.model_process import MAX_UNREAPED

    (tmp_path / "models").mkdir()
    (tmp_path / "counts").mkdir()
    files = 3 * MAX_UNREAPED + 4
    for i in range(files):
        model(tmp_path / "models" / f"m{i:02d}.py", COUNTS_ZOMBIES)
    r = gradcli_process("models", "--json", cwd=tmp_path, env={"GRADCLI_TEST_DIR": str(tmp_path / "counts")})
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["checks"]) == files
    counts = [int((tmp_path / "counts" / f"m{i:02d}.py.txt").read_text()) for i in range(files)]
    assert max(counts) <= MAX_UNREAPED, counts  # before: one more zombie with every file


# --- bad input: one line, exit 2 --------------------------------------------------------------------------

def test_a_negative_seed_is_refused_naming_the_option(tmp_path):
    m = model(tmp_path / "m.py", GOOD)
    r = check(m, "--seed", "-1")
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", "error: --seed must be a non-negative integer, got -1\n")
    r = check(m, "--seed", "-1", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["status"] == "error"
    (tmp_path / "pyproject.toml").write_text("[tool.gradcli]\nseed = -1\n")
    r = check("m.py", cwd=tmp_path)
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and "seed must be a non-negative integer" in r.stderr


@pytest.mark.parametrize("pattern, column", [("(", 2), ("mlp or", 7), ("mlp and (", 10), ("not", 4),
                                             ("mlp bias", 5), ("mlp )", 5)])
def test_a_malformed_k_is_refused_before_any_file_is_imported(tmp_path, pattern, column):
    m = model(tmp_path / "m.py", GOOD, "print('IMPORTED')")
    r = check(m, "-k", pattern)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: -k {pattern!r}: at column {column}: expected ")
    assert len(r.stderr.splitlines()) == 1 and "IMPORTED" not in r.output


def test_k_still_selects_with_names_unique_across_files(tmp_path):
    for d in "ab":
        (tmp_path / d).mkdir()
        model(tmp_path / d / "net.py", GOOD)
    r = check(".", "-k", "b/ and cube", "--json", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert list(by_name(r)) == [os.path.join("b", "net.py") + "::cube"]


@pytest.mark.parametrize("toml", ['tool = "x"\n', "[tool]\ngradcli = 3\n"])
def test_a_pyproject_whose_tool_or_table_is_not_a_table_is_one_line(tmp_path, toml):
    model(tmp_path / "m.py", GOOD)
    (tmp_path / "pyproject.toml").write_text(toml)
    r = check("m.py", cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "pyproject.toml" in r.stderr and "must be a table" in r.stderr
    assert len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, says", [(["--seed", "-1"], "--seed"), (["-k", "nothing_like_it"], "no check matches")])
def test_a_refused_run_leaves_no_stale_junit_file(tmp_path, args, says):
    m = model(tmp_path / "m.py", GOOD)
    out = tmp_path / "r.xml"
    out.write_text("stale report from an earlier run")
    r = check(m, *args, "--junit", out)
    assert r.exit_code == 2
    (case,) = junit_cases(out).values()
    assert says in case.find("error").get("message")


# --- the Python API stays in the caller's process ---------------------------------------------------------

def test_the_python_api_runs_in_the_callers_process():
    from gradcli.testing import assert_gradients

    seen = []

    def f(x):
        seen.append(os.getpid())
        return np.sum(x ** 2)

    assert_gradients(f, grad=lambda x: 2 * x, x=np.array([1.0, 2.0]))
    assert seen and set(seen) == {os.getpid()}


def test_without_fork_gradcli_check_runs_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.setattr(isolated, "AVAILABLE", False)
    monkeypatch.setenv("GRADCLI_TEST_DIR", str(tmp_path))
    r = check(model(tmp_path / "m.py", GOOD), "--json")
    assert r.exit_code == 0 and [c["status"] for c in json.loads(r.stdout)["checks"]] == ["pass"]
    assert int((tmp_path / "cube").read_text()) == os.getpid()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel ends the model process on Linux")
def test_a_model_process_does_not_outlive_a_gradcli_killed_outright(tmp_path):
    m = model(tmp_path / "slow_model.py", SLOW)
    mark = tmp_path / "started"
    env = {**os.environ, "GRADCLI_TEST_MARK": str(mark), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gradcli", "check", str(m)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
    try:
        wait_for(mark, proc)
        proc.kill()  # SIGKILL: gradcli gets no chance to end it
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    model_pid, helper_pid = map(int, mark.read_text().split())
    deadline = time.monotonic() + 30
    while alive(model_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not alive(model_pid)
    finally:
        for pid in (model_pid, helper_pid):  # the helper, the model's own, is left to us when gradcli is killed
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_where_waitid_is_missing_as_on_macos_a_killed_model_process_is_still_told(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "waitid")
    stmt = "os.kill(os.getpid(), signal.SIGKILL)"
    model(tmp_path / "m.py", GOOD, placed("function", stmt), AFTER)
    r = check("m.py", "--json", cwd=tmp_path)
    checks = by_name(r)
    assert [c["status"] for c in checks.values()] == ["pass", "error", "error"]
    assert checks["quits"]["message"] == ENDINGS[stmt]


def test_a_hangup_that_gradcli_was_told_to_ignore_stays_ignored(tmp_path):
    """``nohup gradcli check ...``: SIGHUP is ignored from the start, and the run goes on."""
    m = model(tmp_path / "m.py", GOOD, textwrap.dedent("""
        @gradcli.check(x=np.array([1.0, 2.0]))
        def waits(x):
            if not os.path.exists(os.environ["GRADCLI_TEST_MARK"]):
                open(os.environ["GRADCLI_TEST_MARK"], "w").close()
                time.sleep(2)  # the hangup arrives now
            return np.sum(x ** 2)
        """), AFTER)
    mark = tmp_path / "started"
    env = {**os.environ, "GRADCLI_TEST_MARK": str(mark), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gradcli", "check", str(m), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        wait_for(mark, proc)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (stdout, stderr)
    assert [c["status"] for c in json.loads(stdout)["checks"]] == ["pass", "pass", "pass"]
