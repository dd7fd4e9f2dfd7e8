"""The directory put first on ``PYTHONPATH`` for the child processes of a checked program: its
``sitecustomize`` starts checking in every Python child (see :mod:`tritonkit.check.process`)."""
