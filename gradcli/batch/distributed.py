"""A batch's chunks as tasks on a Dask cluster (``--dask ADDRESS``; the ``dask`` extra).

The client ships the batch's :class:`~gradcli.batch.chunk.Plan` and, for sampled points, the
:class:`~gradcli.batch.points.Sampler` once to every worker; each task draws (or is given) its chunk's
points, compiles the programs on first use in its worker, and returns the chunk's
:class:`~gradcli.batch.merge.Partial`. The client takes the partials in chunk order, with a bounded
number of tasks in flight, so that its memory does not grow with the batch. Workers need gradcli (the
same version) and nothing else.
"""
from __future__ import annotations

import logging
import os
import uuid
from collections import deque
from concurrent.futures import CancelledError

from gradcli import __version__
from gradcli.core.errors import BadInput
from gradcli.engines.backend import numba_installed
from gradcli.batch.points import Sampler

#: Seconds to reach the scheduler, and to wait for its first worker.
CONNECT_TIMEOUT = 5
#: Tasks in flight per worker thread: one running, one queued behind it.
IN_FLIGHT_PER_THREAD = 2
INSTALL = "pip install 'gradcli[dask]'"


def _distributed():
    try:
        import distributed
    except ImportError:
        raise BadInput(f"--dask needs Dask's distributed scheduler, which is not installed: {INSTALL}") from None
    return distributed


def connect(dask):
    """``dask`` (a scheduler's address, or a ``distributed.Client``) -> (client, whether it is ours to close).
    Raises BadInput when Dask is missing or the scheduler cannot be reached within :data:`CONNECT_TIMEOUT`."""
    distributed = _distributed()
    if isinstance(dask, distributed.Client):
        return dask, False
    if not isinstance(dask, str):
        raise BadInput(f"dask must be a scheduler's address (tcp://host:8786) or a distributed.Client, "
                       f"got {type(dask).__name__}")
    address = dask.strip()
    _check_address(address, distributed)
    _quiet_logs()
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        _restore_logs()
        raise BadInput(f"--dask {address}: no Dask scheduler answered there ({_one_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - a transport misconfigured in a way _check_transport does not know
        _restore_logs()
        raise BadInput(f"--dask {address}: cannot connect ({type(exc).__name__}: {_one_line(exc)})") from None
    return client, True


#: distributed's loggers' levels from before a client of gradcli's own was opened (see _quiet_logs)
_saved_levels: list = []


def _quiet_logs() -> None:
    # a scheduler lost mid-run makes distributed log its reconnection attempts and their tracebacks
    # (some 35 lines) before gradcli's own one line says the same; quiet only while our client lives.
    # Dask's configuration gives some of its loggers (distributed.client) levels of their own.
    names = ["distributed", *(n for n in logging.root.manager.loggerDict if n.startswith("distributed."))]
    _saved_levels.append({n: logging.getLogger(n).level for n in names})
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL)


def _restore_logs() -> None:
    if _saved_levels:
        for n, level in _saved_levels.pop().items():
            logging.getLogger(n).setLevel(level)


def _check_address(address: str, distributed) -> None:
    """Reject what Client would half-construct and then hang on closing (no port, an unknown scheme)."""
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import backends

    try:
        scheme, location = parse_address(address)
        if scheme not in backends:
            raise ValueError(f"unknown protocol {scheme!r}; use tcp://host:port")
        if scheme != "inproc":
            parse_host_port(location)
    except ValueError as exc:
        raise BadInput(f"--dask {address or repr(address)}: not a scheduler address ({_one_line(exc)}); "
                       "expected tcp://host:8786") from None
    _check_transport(address, scheme, distributed, backends)


def _check_transport(address: str, scheme: str, distributed, backends) -> None:
    """Reject a transport that cannot connect from here before Client half-constructs with it (a failed
    Client waits 10 s on closing and prints distributed's traceback)."""
    if scheme == "inproc":
        raise BadInput(f"--dask {address}: an inproc:// scheduler is reachable only from inside its own "
                       "process; use its tcp:// address")
    try:
        backends[scheme].get_connector()
    except Exception as exc:  # noqa: BLE001 - ucx:// without ucx-py fails to build its connector
        raise BadInput(f"--dask {address}: {scheme}:// cannot be used here ({_one_line(exc)}); "
                       "use tcp://host:8786") from None
    if scheme in ("tls", "wss") and distributed.Security().get_connection_args("client")["ssl_context"] is None:
        raise BadInput(f"--dask {address}: {scheme}:// needs TLS certificates and Dask's configuration has "
                       "none (distributed.comm.tls: ca-file, client.cert, client.key); set them, or use tcp://")


def close(client) -> None:
    # a run stopped by a signal leaves futures of the client's own event loop that time out as it closes;
    # asyncio would print each ("Future exception was never retrieved") after gradcli's one line
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    try:
        client.close(timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError):  # the scheduler is gone already
        pass
    finally:
        _restore_logs()


def _worker_facts():
    return __version__, numba_installed()


def _preflight(client, plan) -> int:
    """Check that the cluster has workers that can run the plan -> its number of worker threads."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except TimeoutError:
        raise BadInput(f"--dask {client.scheduler.address}: the scheduler has no workers "
                       f"(start some: dask worker {client.scheduler.address})") from None
    try:
        facts = client.run(_worker_facts)
    except ImportError as exc:
        raise BadInput(f"--dask: a worker cannot import gradcli ({_one_line(exc)}): install it on every "
                       "worker") from None
    for worker, (version, has_numba) in sorted(facts.items()):
        if version != __version__:
            raise BadInput(f"--dask: worker {worker} runs gradcli {version}, this client {__version__}: "
                           "install the same version everywhere")
        if plan.options.engine == "numba" and not has_numba:
            raise BadInput(f"--dask: the batch runs the numba engine and worker {worker} has no numba: "
                           "install gradcli[fast] there, or pass --engine numpy")
    return max(sum(client.nthreads().values()), 1)


#: glibc's mallopt parameters, and the values a chunk's arrays need
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD, MMAP_THRESHOLD = 256 << 20, 32 << 20
_allocator_tuned = False


def _tune_allocator() -> None:
    """Undo, for this worker process, the static malloc thresholds Dask's nanny sets
    (MALLOC_TRIM_THRESHOLD_=65536): with them every array of a chunk (512 KB at 65536 points) is a
    fresh mmap, page-faulted in and unmapped again, and a chunk takes 3 to 10 times as long
    (docs/batch.md). Glibc only; elsewhere, and where no threshold was set, nothing changes."""
    global _allocator_tuned
    if _allocator_tuned:
        return
    _allocator_tuned = True
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def run_chunk(work, plan, points, start: int, stop: int):
    """A task: ``work(plan, points, start, stop)`` (chunk.chunk_partial, passed in so that this module
    does not import the comparison that calls it) on the chunk ``start:stop``; ``points`` is the Sampler
    (drawn here) or the chunk's own points."""
    _tune_allocator()
    host_pts = points.chunk(start, stop) if isinstance(points, Sampler) else points
    return work(plan, host_pts, start, stop)


def partials(client, plan, source, chunk: int, work):
    """The partials ``work`` gives for ``source``'s chunks in chunk order, computed on the cluster; at
    most :data:`IN_FLIGHT_PER_THREAD` tasks per worker thread are in flight. Closing the generator (an
    error, a stop signal) cancels the tasks still pending."""
    window = IN_FLIGHT_PER_THREAD * _preflight(client, plan)
    N = int(source.n)
    ranges = ((a, min(N, a + chunk)) for a in range(0, N, chunk))
    tag = uuid.uuid4().hex[:12]
    sampled = isinstance(source, Sampler)
    shipped, pending, sent = [], deque(), {"times": 0}

    def ship():
        # broadcast: every worker holds the plan (and the sampler) that its tasks read
        shipped.append(client.scatter(plan, broadcast=True, hash=False, timeout=RESEND_TIMEOUT))
        if sampled:
            shipped.append(client.scatter(source, broadcast=True, hash=False, timeout=RESEND_TIMEOUT))
        sent["times"] += 1

    def submit(a, b):
        plan_f, pts = shipped[-2] if sampled else shipped[-1], shipped[-1] if sampled else source.chunk(a, b)
        pending.append((a, b, client.submit(run_chunk, work, plan_f, pts, a, b, pure=False,
                                            key=f"gradcli-chunk-{tag}-{sent['times']}-{a}")))

    try:
        ship()
        for a, b in ranges:
            submit(a, b)
            if len(pending) >= window:
                break
        while pending:
            try:
                p = pending[0][2].result()
            except (OSError, CancelledError) as exc:  # the scheduler went away, or cancelled the task
                _resend(client, exc, sent["times"], ship, submit, pending)
                continue
            pending.popleft()
            nxt = next(ranges, None)
            if nxt is not None:
                submit(*nxt)
            yield p
    finally:
        if pending or shipped:
            try:
                client.cancel([*(f for *_, f in pending), *shipped])
            except (OSError, TimeoutError):
                pass


#: Times the plan is sent again after the cluster lost it (a worker restarted by its nanny) in one run.
RESENDS = 3
#: Seconds a re-send waits for a worker (a restarted one registers within a few).
RESEND_TIMEOUT = 30


def _resend(client, exc, times: int, ship, submit, pending) -> None:
    """A worker that held the only copy of what was scattered died (its nanny restarts it at once): the
    scheduler forgets the plan and cancels every task that reads it. Send it again and resubmit them;
    with the scheduler itself gone, or after :data:`RESENDS` tries, the run is lost."""
    lost = BadInput(f"--dask: lost the cluster during the run ({_one_line(exc)})")
    if times > RESENDS or client.status != "running":
        raise lost from None
    again = [(a, b) for a, b, _ in pending]
    try:
        client.cancel([f for *_, f in pending])
        pending.clear()
        ship()
    except (OSError, TimeoutError, CancelledError):
        raise lost from None
    for a, b in again:
        submit(a, b)


def _one_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
