"""Entry point of the child process ``tritonkit tune`` runs (``python -m tritonkit.tune._child``)."""
import sys

from ._cli import child_main

if __name__ == "__main__":
    sys.exit(child_main())
