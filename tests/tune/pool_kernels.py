"""A kernel and its workload for the pool tests (imported by name in the worker processes, which
run it in Triton's CPU interpreter)."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if WRONG:
        mask = mask & (offs < n // 2)  # a config that forgets half of the output
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def workload(key):
    """The launch's arguments for key {"n": ...}: seeded, so every worker makes the same inputs."""
    g = torch.Generator().manual_seed(key["n"])
    n = key["n"]
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    return (x, y, torch.zeros(n), n), {"grid": lambda meta: (triton.cdiv(n, meta["BLOCK"]),)}
