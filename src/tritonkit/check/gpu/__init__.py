"""Checking on the GPU, at native speed: ``tritonkit check --gpu=sanitizer`` runs the script under
NVIDIA's ``compute-sanitizer --tool memcheck`` (with PyTorch's caching allocator off, which would
otherwise hide an overrun inside its own blocks) and reports what memcheck finds as tritonkit's
findings: the kernel's source line, the tensor argument and its elements, the program ids
(:mod:`.sanitizer`), from a log of every launch's tensor arguments kept in the script's process
(:mod:`.launch_log`)."""
