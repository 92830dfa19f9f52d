import os
import sys

from hypothesis import settings

# tests/strategies.py is shared by test modules in several folders
sys.path.insert(0, os.path.dirname(__file__))

# CI must be reproducible: the same examples every run (locally, hypothesis keeps exploring)
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
