"""Shared test set-up: the example scripts in ``examples/`` are importable by name (``import softmax``)."""
import os
import sys

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
if EXAMPLES_DIR not in sys.path:
    sys.path.insert(0, EXAMPLES_DIR)
