"""A kernel checked in the interpreter still compiles natively afterwards in the same process, as
``outputs="gpu"`` and the pytest plugin need: checking leaves nothing of the interpreter in Triton's
compiler. (Triton's code generator binds ``min``/``max``/``print`` when it is first imported, and a
tensor argument's first ``mangle_type`` imports it: imported inside a checked launch it kept the
interpreter's wrappers, and Liger-Kernel's RMSNorm backward then failed to compile on the H100.)

Compiling for a CUDA target needs no GPU: Triton's front end and the bundled ``ptxas`` run on the
CPU, so this runs on the CPU machine too."""
import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent('''
    import sys
    assert "triton.compiler.code_generator" not in sys.modules, "imported before the launch: nothing is tested"
    import torch
    import triton
    import triton.language as tl
    from tritonkit.check import checking

    @triton.jit
    def clamp_rows(x_ptr, n, B: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        end = max(min((pid + 1) * B, n), 0)
        offs = pid * B + tl.arange(0, B)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < end) * 2, mask=offs < end)

    x = torch.ones(16)
    with checking() as session:
        clamp_rows[(2,)](x, 13, B=8)
    assert x.tolist() == [2.0] * 13 + [1.0] * 3, x
    assert not session.findings, session.findings
    # tritonkit types the arguments itself: the launch does not pay for importing the compiler
    assert "triton.compiler.code_generator" not in sys.modules
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource
    src = ASTSource(clamp_rows, {"x_ptr": "*fp32", "n": "i32", "B": "constexpr"}, {(2,): 8})
    triton.compile(src, target=GPUTarget("cuda", 90, 32))
    print("compiled")
''')


# Something inside a launch imports the code generator while triton.language is patched (the first
# mangle_type did, before tritonkit typed arguments itself): the scope's end executes it again.
_IMPORTED_WHILE_PATCHED = textwrap.dedent('''
    import sys
    assert "triton.compiler.code_generator" not in sys.modules
    import triton
    import triton.language as tl
    from triton.runtime import interpreter
    from tritonkit.check.triton_hooks import patched_language

    @triton.jit
    def clamp(x_ptr, n, B: tl.constexpr):
        offs = tl.arange(0, B)
        tl.store(x_ptr + offs, min(tl.load(x_ptr + offs), n))

    with patched_language(interpreter.interpreter_builder):
        import triton.compiler.code_generator  # noqa: F401
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource
    triton.compile(ASTSource(clamp, {"x_ptr": "*fp32", "n": "i32", "B": "constexpr"}, {(2,): 8}),
                   target=GPUTarget("cuda", 90, 32))
    print("compiled")
''')


def _cuda_backend() -> bool:
    try:
        from triton.backends import backends
    except ImportError:  # pragma: no cover
        return False
    return "nvidia" in backends


@pytest.mark.skipif(not _cuda_backend(), reason="this Triton has no NVIDIA backend to compile for")
@pytest.mark.parametrize("script_text", [_SCRIPT, _IMPORTED_WHILE_PATCHED], ids=["checked", "imported-while-patched"])
def test_a_kernel_calling_min_compiles_natively_after_it_was_checked(tmp_path, script_text):
    script = tmp_path / "native_after_check.py"
    script.write_text(script_text)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache")}  # compiled here, not found in a cache
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiled" in proc.stdout
