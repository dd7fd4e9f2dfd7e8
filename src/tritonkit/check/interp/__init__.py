"""The interpreter under the checks: Triton's front end over tritonkit's builders.

* :mod:`.builder` — :class:`~.builder.CheckedBuilder`, one program at a time: numerics like the GPU,
  memory through the launch's address space, every result shown to the checks' hooks;
* :mod:`.batched`, :mod:`.batched_ops`, :mod:`.simt` — the same for a batch of programs at once;
* :mod:`.kernels` — the rewritten kernel bodies and the kernel's frames on the stack;
* :mod:`.numerics`, :mod:`.libdevice` — bf16/fp16/fp8/tf32 arithmetic and libdevice on the CPU;
* :mod:`.builtins` — Triton builtins called by a name the language patches never set (an alias);
* :mod:`.taint` — per-lane facts carried with values (undefined lanes, overflow, NaN origins).
"""
