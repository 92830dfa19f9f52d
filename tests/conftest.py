import os
import sys

# tests/strategies.py is shared by test modules in several folders
sys.path.insert(0, os.path.dirname(__file__))
