"""The checked CPU interpreter against the real GPU: the same kernels, compiled by Triton and run on
CUDA, must give the same bits (casts, 16-bit arithmetic) or the same values within the GPU's own
error (tl.dot input precision, libdevice). Skipped without a GPU."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import tritonkit

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _both(kernel, grid, make_args, **meta):
    """Run ``kernel`` natively on the GPU and in the checked interpreter on the CPU; returns both
    argument lists (outputs filled in)."""
    gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in make_args()]
    kernel[grid](*gpu, **meta)
    torch.cuda.synchronize()
    cpu = make_args()
    with tritonkit.checking() as s:
        kernel[grid](*cpu, **meta)
    assert not s.findings, [f.to_dict() for f in s.findings]
    return [a.cpu() if isinstance(a, torch.Tensor) else a for a in gpu], cpu


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_elementwise_bits_match_the_gpu(binary_kernel, dtype):
    torch.manual_seed(1)
    x = torch.randn(1000, dtype=dtype) * 10
    y = torch.randn(1000, dtype=dtype)

    def args():
        outs = [torch.zeros(1000, dtype=dtype) for _ in range(4)]
        return [x.clone(), y.clone(), *outs, torch.zeros(1000, dtype=torch.bool), torch.zeros(1000, dtype=dtype),
                torch.zeros(1000, dtype=dtype), 1000]
    gpu, cpu = _both(binary_kernel, (4,), args, BLOCK=256)
    names = ["add", "mul", "div", "max", "lt", "neg"]
    for name, g, c in zip(names, gpu[2:8], cpu[2:8]):
        assert torch.equal(g, c), name
    # exp: the GPU's fp32 exp may differ from numpy's by an fp32 ulp before rounding to 16 bits
    torch.testing.assert_close(gpu[8], cpu[8], atol=0, rtol=torch.finfo(dtype).eps)


def test_casts_match_the_gpu_bit_for_bit(cast_kernel):
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 300.0, -1.0, 2.5, 3.5, -2.5,
                            1000.0, -1000.0, 1.00390625, 1.01171875])
    torch.manual_seed(2)
    x = torch.cat([special, torch.randn(114) * 100]).float()

    def args():
        n = x.numel()
        return [x.clone(), torch.zeros(n, dtype=torch.bfloat16), torch.zeros(n, dtype=torch.float16),
                torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.uint8),
                torch.zeros(n, dtype=torch.float8_e4m3fn), torch.zeros(n, dtype=torch.float8_e5m2),
                torch.zeros(n, dtype=torch.bfloat16), n]
    gpu, cpu = _both(cast_kernel, (1,), args, BLOCK=128)
    for name, g, c in zip(["bf16", "fp16", "int32", "uint8", "e4m3", "e5m2", "bf16 rtz"], gpu[1:8], cpu[1:8]):
        gb, cb = g.view(torch.uint8), c.view(torch.uint8)
        nan = torch.isnan(g.float()) & torch.isnan(c.float()) if g.is_floating_point() else None
        if nan is not None:  # NaN payloads may differ; both must be NaN
            keep = ~nan
            assert torch.equal(g[keep].float(), c[keep].float()), name
        else:
            assert torch.equal(gb, cb), name


@pytest.mark.parametrize("precision", ["default", "tf32", "tf32x3", "ieee"])
def test_fp32_dot_matches_the_gpu(dot_kernel, precision):
    torch.manual_seed(3)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    gpu, cpu = _both(dot_kernel, (1,), lambda: [a.clone(), b.clone(), torch.zeros(32, 32), 32, 32, 32],
                     PRECISION=precision)
    # the tf32 rounding of the inputs must be the GPU's: a wrong rounding gives errors of ~1e-3
    torch.testing.assert_close(cpu[2], gpu[2], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_reductions_close_to_the_gpu(reduce_kernel, dtype):
    torch.manual_seed(4)
    x = torch.randn(4, 64, dtype=dtype) - 0.5

    def args():
        return [x.clone(), torch.zeros(4, dtype=dtype), torch.zeros(4, dtype=dtype), torch.zeros(4, dtype=dtype),
                torch.zeros(4, dtype=torch.int32), torch.zeros(4, 64, dtype=dtype)]
    gpu, cpu = _both(reduce_kernel, (4,), args, N=64)
    for g, c in zip(gpu[2:5], cpu[2:5]):  # max, min, argmax: exact
        assert torch.equal(g, c)
    # sums: the GPU rounds after each combine in its own order, tritonkit once: a few 16-bit ulps apart
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(cpu[1].float(), gpu[1].float(), atol=8 * eps * 8, rtol=8 * eps)


def test_libdevice_close_to_the_gpu(libdevice_kernel):
    torch.manual_seed(5)
    x = torch.randn(100)
    gpu, cpu = _both(libdevice_kernel, (1,), lambda: [x.clone(), torch.zeros(100), 100], BLOCK=128)
    torch.testing.assert_close(cpu[1], gpu[1], atol=4e-6, rtol=4e-6)



@triton.jit
def _mul_add_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    tl.store(out_ptr + 0 * n + offs, a * b + c, mask=m)
    tl.store(out_ptr + 1 * n + offs, c - a * b, mask=m)
    tl.store(out_ptr + 2 * n + offs, a * b - c, mask=m)
    p = a * b  # a product with two uses: fused into both
    tl.store(out_ptr + 3 * n + offs, p + c + p * c, mask=m)
    t = 0.7978845608028654 * (a + 0.044715 * a * a * a)  # GELU's tanh argument, as Liger writes it
    tl.store(out_ptr + 4 * n + offs, 0.5 * a * (1 + t) + (1 - t * t) * b, mask=m)


@pytest.mark.parametrize("fusion", [True, False], ids=["fp_fusion", "no_fp_fusion"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_multiply_add_contraction_matches_the_gpu_bit_for_bit(dtype, fusion):
    """Triton compiles with ``enable_fp_fusion``: the GPU computes an fp32 ``a*b + c`` as one fma.
    The interpreter contracts the same products (and none with ``enable_fp_fusion=False``)."""
    torch.manual_seed(3)
    n = 4096
    a, b, c = (torch.randn(n, dtype=dtype) * s for s in (3, 2, 5))

    def args():
        return [a.clone(), b.clone(), c.clone(), torch.zeros(5 * n, dtype=dtype), n]
    gpu, cpu = _both(_mul_add_kernel, (n // 256,), args, BLOCK=256, enable_fp_fusion=fusion)
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    differ, ulps = {}, {}
    for i, name in enumerate(["a*b+c", "c-a*b", "a*b-c", "p+c+p*c", "gelu-like"]):
        g, h = gpu[3][i * n:(i + 1) * n], cpu[3][i * n:(i + 1) * n]
        differ[name] = int((g.view(bits) != h.view(bits)).sum())
        ulps[name] = int((g.view(bits).long() - h.view(bits).long()).abs().max())
    if dtype.itemsize >= 4 or not fusion:
        assert differ == dict.fromkeys(differ, 0), f"elements that differ from the GPU's, of {n}: {differ}"
        return
    # 16-bit with fusion: LLVM contracts some 16-bit products and not others, depending on how each
    # product is used (measured on an H100, Triton 3.6: in this kernel the compound expressions were
    # contracted and the single-product ones were not; in a kernel with fewer uses of a*b, a*b + c
    # was one fma.rn.f16x2). The interpreter contracts none: at most a product's rounding apart
    eps = torch.finfo(dtype).eps
    for name in ("a*b+c", "c-a*b", "a*b-c"):
        assert ulps[name] <= 1, (name, differ, ulps)
    for i, name in ((3, "p+c+p*c"), (4, "gelu-like")):
        g, h = gpu[3][i * n:(i + 1) * n].double(), cpu[3][i * n:(i + 1) * n].double()
        torch.testing.assert_close(h, g, rtol=4 * eps, atol=4 * eps * float(g.abs().max()), msg=name)


PRINT_SCRIPT = '''
import sys
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    if pid == 1:
        tl.device_print("x", x)
        tl.device_print("pid", pid)
        tl.device_print("h", x.to(tl.int32, bitcast=True), hex=True)


x = torch.arange(16, dtype=torch.float32, device=sys.argv[1]) / 4
k[(2,)](x, BLOCK=8)
if sys.argv[1] == "cuda":
    torch.cuda.synchronize()
'''


def test_device_print_lines_match_the_gpu(tmp_path):
    """The same lines as the GPU's printf (which prints them in no fixed order, and an element once per
    thread that holds a copy of it)."""
    import os
    import subprocess
    import sys
    path = tmp_path / "print_script.py"
    path.write_text(PRINT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("TRITON_INTERPRET", None)  # an in-process CLI test may have set it: compile for the GPU
    gpu = subprocess.run([sys.executable, str(path), "cuda"], capture_output=True, text=True, timeout=300, env=env)
    cpu = subprocess.run([sys.executable, "-m", "tritonkit", "check", "--", sys.executable, str(path), "cpu"],
                         capture_output=True, text=True, timeout=300, env=env)
    gpu_lines = sorted(line for line in gpu.stdout.splitlines() if line.startswith("pid"))
    cpu_lines = sorted(line for line in cpu.stdout.splitlines() if line.startswith("pid"))
    assert len(cpu_lines) == 17, cpu.stdout + cpu.stderr
    assert set(cpu_lines) == set(gpu_lines), (cpu_lines, sorted(set(gpu_lines)))


@triton.jit
def _double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def test_a_launch_captured_in_a_cuda_graph_runs_natively_and_is_recorded():
    """A graph records its launches and runs them at replay, where no interpreter sees them, and a
    tensor cannot be copied to the host during a capture: such a launch runs natively, unchecked."""
    x = torch.randn(1000, device="cuda")
    out = torch.zeros_like(x)
    with tritonkit.checking() as session:
        _double_kernel[(4,)](x, out, 1000, BLOCK=256)  # checked
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            _double_kernel[(4,)](x, out, 1000, BLOCK=256)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _double_kernel[(4,)](x, out, 1000, BLOCK=256)
    x.copy_(torch.arange(1000, device="cuda", dtype=torch.float32))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)
    assert [r.status for r in session.launches] == ["ok", "ok", "captured"] and not session.findings
    assert session.summary()["captured"] == 1


@triton.jit
def _silu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=offs < n)  # exp: the GPU's ex2.approx


@triton.jit
def _overrun_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n + 7)  # BUG: 7 past the end


def test_outputs_gpu_gives_the_gpus_results_and_keeps_the_interpreters_where_a_launch_has_findings():
    """``outputs="gpu"``: a clean launch is checked, then run natively, and its tensors hold exactly
    what the GPU computes; a launch with a finding keeps the interpreter's results (the GPU never
    makes the bad access)."""
    torch.manual_seed(6)
    n = 1 << 16
    x = torch.randn(n, device="cuda") * 4
    native = torch.empty_like(x)
    _silu_kernel[(n // 1024,)](x, native, n, BLOCK=1024)
    out = torch.full_like(x, float("nan"))
    with tritonkit.checking(outputs="gpu") as s:
        _silu_kernel[(n // 1024,)](x, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    assert not s.findings and s.launches[0].outputs == "gpu"
    assert torch.equal(out.view(torch.int32), native.view(torch.int32))
    # the same launch with the interpreter's results: close, and a record that says so
    out2 = torch.full_like(x, float("nan"))
    with tritonkit.checking() as s2:
        _silu_kernel[(n // 1024,)](x, out2, n, BLOCK=1024)
    assert s2.launches[0].outputs == "checked"
    torch.testing.assert_close(out2, native, rtol=4e-7, atol=4e-7)
    # a buggy launch: reported, and its results are the interpreter's (in-bounds lanes written)
    buf = torch.zeros(1000 + 24, device="cuda")
    y, dst = buf[:1000].clone(), buf[:1000]
    with tritonkit.checking(outputs="gpu") as s3:
        _overrun_kernel[(2,)](y, dst, 1000, BLOCK=512)
    torch.cuda.synchronize()
    assert [f.kind for f in s3.findings] == ["out_of_bounds"] and s3.launches[0].outputs == "checked"
    assert torch.equal(dst, y + 1) and torch.equal(buf[1000:], torch.zeros(24, device="cuda"))


@triton.jit
def _builtin_min_max_kernel(x_ptr, out_ptr, n, big):
    a = tl.load(x_ptr)  # NaN
    b = tl.load(x_ptr + 1)
    tl.store(out_ptr, min(a, 0.5))
    tl.store(out_ptr + 1, max(a, 0.5))
    tl.store(out_ptr + 2, min(0.5, a))
    tl.store(out_ptr + 3, max(a, 2.0, 1.0))
    tl.store(out_ptr + 4, min(b, 3.0, 2.0))
    tl.store(out_ptr + 5, (min(n, big) * 100000).to(tl.float32))  # int64: no int32 wrap


def test_builtin_min_max_match_the_gpu():
    """``min``/``max`` in a kernel: Triton's compiler makes them ``tl.minimum``/``tl.maximum`` (NaN
    not propagated, operands promoted), not Python's comparisons."""
    def args():
        return [torch.tensor([float("nan"), 5.0]), torch.full((6,), -1.0), 100000, 2**40]
    gpu, cpu = _both(_builtin_min_max_kernel, (1,), args)
    assert torch.equal(gpu[1], cpu[1]), (gpu[1], cpu[1])
    assert cpu[1].tolist() == [0.5, 0.5, 0.5, 2.0, 2.0, 1e10]
