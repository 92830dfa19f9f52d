"""Batch mode on a Dask cluster (``--dask ADDRESS``, ``grad_batch(dask=...)``): the same statistics and
``--out`` files as a local run, a bounded number of tasks in flight, one line and exit 2 for a missing
Dask or an unreachable scheduler, and a stop signal that cancels the tasks and leaves no temporary file.
The clusters are LocalClusters of 2 workers: threads in this process (reachable over tcp, so that a
subprocess can be their client), and once real worker processes, to which the plan is pickled."""
from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import gradcli
from gradcli.batch import compare as bc
from gradcli.core.errors import BadInput
from gradcli.cli import main
from cli_helpers import PLAIN_ENV, RUNNER, strict_json

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EXPR, DOMAIN = "sqrt(x) + log(y) * x + abs(x - y)", "x=-1:1, y=-1:2"
INSTALL_LINE = ("error: --dask needs Dask's distributed scheduler, which is not installed: "
                "pip install 'gradcli[dask]'")


def _stats(doc):
    """The document without timings (the only thing allowed to differ between equal runs)."""
    doc = {k: v for k, v in doc.items() if k not in ("seconds", "points_per_second")}
    doc["methods"] = {k: {kk: vv for kk, vv in m.items() if kk not in ("seconds", "points_per_second")}
                      for k, m in doc["methods"].items()}
    return doc


def grad(*args):
    result = RUNNER.invoke(main, ["grad", *map(str, args)], env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                                  dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    from distributed import Client

    with Client(cluster, set_as_default=False) as c:
        yield c


def _gradcli_tasks(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: sum("gradcli-chunk" in str(k) for k in dask_scheduler.tasks))


# --- without Dask, or without a cluster -------------------------------------------------------------------

def test_without_dask_one_line_naming_the_extra_and_exit_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    r = grad("x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--dask", "tcp://127.0.0.1:8786")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [INSTALL_LINE]
    with pytest.raises(BadInput, match=r"pip install 'gradcli\[dask\]'"):
        gradcli.grad_batch("x*y", n=10, domain="x=0:1, y=0:1", dask="tcp://127.0.0.1:8786")


def test_dask_only_applies_in_batch_mode():
    r = grad("x*y", "--at", "x=1, y=2", "--dask", "tcp://127.0.0.1:8786")
    assert r.exit_code == 2 and "--dask only applies in batch mode" in r.stderr


@pytest.mark.parametrize("address,why", [
    ("nonsense", "missing port"), ("tcp://host", "missing port"), ("http://host:80", "unknown protocol"),
    ("", "missing port"),
])
def test_a_malformed_address_is_one_line_and_exit_2(address, why):
    pytest.importorskip("distributed")
    t0 = time.monotonic()
    r = grad("x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--dask", address)
    assert r.exit_code == 2 and r.stdout == "" and time.monotonic() - t0 < 5
    [line] = r.stderr.splitlines()
    assert line.startswith("error: --dask ") and why in line and "tcp://host:8786" in line


@pytest.mark.parametrize("address,why", [
    ("tls://127.0.0.1:1", "tls:// needs TLS certificates"), ("wss://127.0.0.1:1", "wss:// needs TLS certificates"),
    ("inproc://127.0.0.1/1/2", "reachable only from inside its own process"),
    ("ucx://127.0.0.1:1", "ucx:// cannot be used here"),
])
def test_a_transport_that_cannot_connect_from_here_is_one_line_and_exit_2_at_once(address, why):
    distributed = pytest.importorskip("distributed")
    if address.startswith("ucx") and distributed.comm.registry.backends.get("ucx") is None:
        pytest.skip("this distributed has no ucx backend")
    if address.startswith("ucx"):
        try:
            distributed.comm.registry.backends["ucx"].get_connector()
            pytest.skip("ucx is installed here")
        except Exception:  # noqa: BLE001 - the connector cannot be built: what the test is about
            pass
    t0 = time.monotonic()
    r = grad("x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--dask", address)
    assert r.exit_code == 2 and r.stdout == "" and time.monotonic() - t0 < 4
    [line] = r.stderr.splitlines()
    assert line.startswith(f"error: --dask {address}: ") and why in line, line


def test_no_scheduler_at_the_address_is_one_line_and_exit_2_within_the_timeout(monkeypatch):
    pytest.importorskip("distributed")
    from gradcli.batch import distributed as bd

    monkeypatch.setattr(bd, "CONNECT_TIMEOUT", 1)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    r = grad("x*y", "--batch", 100, "--domain", "x=0:1, y=0:1", "--dask", f"tcp://127.0.0.1:{port}", "--json")
    assert r.exit_code == 2 and time.monotonic() - t0 < 8
    [line] = r.stderr.splitlines()
    assert line.startswith(f"error: --dask tcp://127.0.0.1:{port}: no Dask scheduler answered there")
    assert strict_json(r.stdout)["error"].startswith("--dask")


def test_distributeds_own_logs_are_quiet_while_a_client_of_gradclis_own_lives(cluster):
    # a scheduler lost mid-run made distributed.client log ~35 lines of tracebacks before gradcli's one
    # line; they say nothing that line does not, and are quiet only while gradcli's client is open
    import logging
    from gradcli.batch import distributed as bd

    loggers = [logging.getLogger(n) for n in ("distributed", "distributed.client", "distributed.core")]
    before = [lg.level for lg in loggers]
    client, owned = bd.connect(cluster.scheduler_address)
    try:
        assert owned and not any(lg.isEnabledFor(logging.ERROR) for lg in loggers)
    finally:
        bd.close(client)
    assert [lg.level for lg in loggers] == before and all(lg.isEnabledFor(logging.ERROR) for lg in loggers)


def test_a_scheduler_without_workers_is_bad_input(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from gradcli.batch import distributed as bd

    monkeypatch.setattr(bd, "CONNECT_TIMEOUT", 0.5)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty, \
            distributed.Client(empty, set_as_default=False) as c:
        with pytest.raises(BadInput, match="has no workers"):
            gradcli.grad_batch("x*y", n=10, domain="x=0:1, y=0:1", dask=c)


def test_a_worker_with_another_gradcli_is_refused(client, monkeypatch):
    from gradcli.batch import distributed as bd

    monkeypatch.setattr(bd, "_worker_facts", lambda: ("0.0.0", True))
    with pytest.raises(BadInput, match=r"runs gradcli 0\.0\.0, this client"):
        gradcli.grad_batch("x*y", n=10, domain="x=0:1, y=0:1", dask=client)


# --- the same results ------------------------------------------------------------------------------------

CASES = {
    "sampled": dict(expr=EXPR, n=10_000, domain=DOMAIN, seed=7, chunk=1500),
    "float32": dict(expr="tanh(40*x) + 1/x + y**3", n=5000, domain="x=-1:1, y=-2:2", seed=1, chunk=777,
                    dtype="float32"),
    "points": dict(expr="x**2*sin(y) + log(x)", points={"x": np.linspace(-1, 1, 5001), "y": np.linspace(0, 3, 5001)},
                   chunk=512),
    "consensus": dict(expr="x*y, x+y, hypot(x, y)", n=5000, domain="x=-2:2, y=-2:2", chunk=1000,
                      methods="forward,reverse,central,richardson"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_cluster_gives_the_local_statistics(client, case):
    kw = dict(CASES[case])
    expr, points = kw.pop("expr"), kw.pop("points", None)
    local = gradcli.grad_batch(expr, points, **kw).to_dict()
    remote = gradcli.grad_batch(expr, points, dask=client, **kw).to_dict()
    assert _stats(remote) == _stats(local)
    assert local["worst"], "the case has worst points to compare"


def test_histogram_medians_on_a_cluster(client, monkeypatch):
    monkeypatch.setattr(bc, "EXACT_MEDIAN_LIMIT", 100)
    kw = dict(n=10_000, domain=DOMAIN, seed=3, chunk=1500)
    local, remote = (gradcli.grad_batch(EXPR, dask=d, **kw).to_dict() for d in (None, client))
    assert local["median"] == "histogram" and _stats(remote) == _stats(local)


@pytest.mark.parametrize("ext", ["npz", "csv"])
def test_out_files_are_the_local_ones_byte_for_byte(client, tmp_path, ext):
    kw = dict(n=6000, domain="x=-1:1, y=-1:1", chunk=700)
    gradcli.grad_batch("sqrt(x)*y, x/y", out=str(tmp_path / f"local.{ext}"), **kw)
    gradcli.grad_batch("sqrt(x)*y, x/y", out=str(tmp_path / f"remote.{ext}"), dask=client, **kw)
    assert (tmp_path / f"local.{ext}").read_bytes() == (tmp_path / f"remote.{ext}").read_bytes()
    assert sorted(os.listdir(tmp_path)) == [f"local.{ext}", f"remote.{ext}"]


def test_tasks_in_flight_are_bounded(client, monkeypatch):
    from gradcli.batch import distributed as bd

    submitted, done, peak = [0], [0], [0]
    real_submit = client.submit

    def submit(*args, **kwargs):
        submitted[0] += 1
        return real_submit(*args, **kwargs)

    def progress(stop, total):  # a chunk merged: the tasks not yet merged are in flight
        done[0] += 1
        peak[0] = max(peak[0], submitted[0] - done[0])

    monkeypatch.setattr(client, "submit", submit)
    r = gradcli.grad_batch("x*sin(y)", n=12_000, domain="x=0:1, y=0:1", chunk=500, dask=client, progress=progress)
    assert r.status == "agree" and done[0] == submitted[0] == 24
    window = bd.IN_FLIGHT_PER_THREAD * 2  # 2 workers of 1 thread
    assert peak[0] == window  # never more, and the window is kept full while chunks remain


def test_the_command_line_with_an_address(cluster):
    args = ["exp(-(x**2 + y**2)/2) * cos(3*x*y)", "--batch", 20_000, "--domain", "x=-1:1", "--domain", "y=-1:1",
            "--method", "forward,reverse", "--chunk", 4096, "--json"]
    local = grad(*args)
    remote = grad(*args, "--dask", cluster.scheduler_address)
    assert local.exit_code == remote.exit_code == 0 and remote.stderr == ""
    assert _stats(strict_json(remote.stdout)) == _stats(strict_json(local.stdout))


def test_a_worker_restarted_by_its_nanny_mid_run_gets_the_plan_again():
    # the one worker held the only copy of the scattered plan and sampler: restarted, it loses them, the
    # scheduler forgets them and cancels the tasks reading them; the run sends them again and goes on
    distributed = pytest.importorskip("distributed")

    kw = dict(n=8000, domain=DOMAIN, seed=5, chunk=1000)
    local = gradcli.grad_batch(EXPR, **kw).to_dict()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c, set_as_default=False) as client:
        restarted = []

        def progress(done, total):
            if not restarted:
                restarted.append(done)
                client.restart_workers(list(client.scheduler_info()["workers"]))

        remote = gradcli.grad_batch(EXPR, dask=client, progress=progress, **kw).to_dict()
    assert restarted and _stats(remote) == _stats(local)


def test_worker_processes_rebuild_the_pickled_plan():
    distributed = pytest.importorskip("distributed")
    from gradcli.batch import distributed as bd

    kw = dict(n=6000, domain=DOMAIN, seed=5, chunk=1024)
    local = gradcli.grad_batch(EXPR, **kw).to_dict()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c, set_as_default=False) as client:
        remote = gradcli.grad_batch(EXPR, dask=client, **kw).to_dict()
        # Dask's nanny fixes malloc's thresholds in its workers; the chunks undo that for themselves
        tuned = client.run(lambda: (bd._allocator_tuned, "MALLOC_TRIM_THRESHOLD_" in os.environ))
    assert _stats(remote) == _stats(local)
    assert set(tuned.values()) == {(True, True)}


# --- stop signals ------------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_cancels_the_tasks_and_leaves_no_temporary_file(cluster, client, tmp_path, sig):
    from test_stop_signals import LINE, STATUS, finish, start, temporaries

    target = tmp_path / "big.npz"
    target.write_bytes(b"old")
    proc = start(["grad", "x*sin(y)", "--batch", 3_000_000, "--domain", "x=0:1, y=0:1", "--out", target.name,
                  "--dask", cluster.scheduler_address], tmp_path)
    deadline = time.monotonic() + 120
    while not (temporaries(tmp_path) and _gradcli_tasks(client)):  # the chunks are on the cluster
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the cluster"
        time.sleep(0.05)
    proc.send_signal(getattr(signal, sig))
    code, out, err = finish(proc, timeout=60)
    assert code == STATUS[sig] and err.splitlines() == [LINE[sig]] and out == ""
    assert sorted(os.listdir(tmp_path)) == ["big.npz"] and target.read_bytes() == b"old"
    deadline = time.monotonic() + 20
    while _gradcli_tasks(client):  # cancelled, not left to run on
        assert time.monotonic() < deadline, "tasks were left on the cluster"
        time.sleep(0.1)


# --- the progress bar ---------------------------------------------------------------------------------------

def test_the_progress_bar_shows_points_done_rate_and_time_left(monkeypatch):
    from rich.console import Console

    from gradcli.cli import grad_batch as gb

    buf = io.StringIO()
    monkeypatch.setattr(gb, "progress_console", lambda: Console(file=buf, force_terminal=True, width=160))
    with gb._progress(True, 4_000_000) as progress:
        for k in range(1, 4):
            time.sleep(0.15)
            progress(k * 1_000_000, 4_000_000)
        time.sleep(0.15)  # one refresh with the last figures
    text = buf.getvalue()
    assert "3,000,000/4,000,000 points" in text and "ETA" in text
    rates = [float(t.split()[-1].replace(",", "")) for t in text.split(" points/s")[:-1]]
    assert rates and all(1e6 < r < 2e7 for r in rates)  # 1e6 points every 0.15 s: about 6.7e6/s
    assert gb.rate_text(None) == "" and gb.rate_text(1234.4) == "1,234 points/s"
