import os
import sys

from hypothesis import settings

# tests/strategies.py is shared by test modules in several folders
sys.path.insert(0, os.path.dirname(__file__))

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
