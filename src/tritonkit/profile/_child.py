"""Entry point of the process ``tritonkit profile`` runs (``python -m tritonkit.profile._child``)."""
import sys

from ._cli import child_main

if __name__ == "__main__":
    sys.exit(child_main())
