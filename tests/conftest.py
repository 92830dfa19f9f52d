import os
import sys

import pytest
from hypothesis import settings

# tests/strategies.py is shared by test modules in several folders
sys.path.insert(0, os.path.dirname(__file__))

# Triton reads TRITON_INTERPRET when it is first imported, and model processes forked from this one keep
# that import: without a GPU the example kernels run under the interpreter whichever test imports Triton
# first (on a GPU machine they compile; set TRITON_INTERPRET=1 there to run the interpreter anyway)
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# CI must be reproducible: the same examples every run (locally, hypothesis keeps exploring)
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(session, config, items):
    """Tests that start JAX's runtime (their file or their name says jax) run last: after it, a fork of this
    process cannot run JAX, so model files are checked in fresh interpreters (slower, and blind to
    monkeypatches made here)."""
    last = [i for i in items if "jax" in os.path.basename(str(i.fspath)) or "jax" in i.name]
    moved = {id(i) for i in last}
    items[:] = [i for i in items if id(i) not in moved] + last
    for i in last:
        i.user_properties.append(("runs_jax", True))


def _jax_started() -> bool:
    if "jaxlib" not in sys.modules:
        return False
    from jax._src import xla_bridge
    return bool(getattr(xla_bridge, "_backends", None))


_SEEN_EARLY = []


def pytest_runtest_teardown(item, nextitem):
    """A test that starts JAX's runtime without saying jax in its name or file runs among the others,
    and every model file after it is checked in a fresh interpreter: the suite takes several times as
    long. The first such test fails its teardown, naming itself."""
    if _SEEN_EARLY or ("runs_jax", True) in item.user_properties or not _jax_started():
        return
    _SEEN_EARLY.append(item.nodeid)
    pytest.fail(f"{item.nodeid} started JAX's runtime: put jax in its name (conftest runs such tests last)")


def pytest_collection_finish(session):
    """A test module that starts JAX's runtime when it is imported (jax.default_backend(), an array op at
    module level) makes every later model file run in a fresh interpreter instead of a fork: minutes
    on the whole suite. Collection must leave it unstarted; the tests start it, last."""
    if _jax_started():
        raise pytest.UsageError("a test module started JAX's runtime when it was imported: start it inside "
                                "the tests (see tests/kernels/test_pallas_jax_kernels.py)")
