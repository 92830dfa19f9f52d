import os
import sys

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
