"""The example scripts at bfloat16 and float16 (``--dtype``).

Each example's ``main`` checks its own result against PyTorch with the dtype's tolerance and raises
``AssertionError`` when the correct kernel misses it; here every example runs at a small size in
both 16-bit dtypes inside a check session, with no findings, and that check is shown to be live
(it fails on a corrupted result). The bugs are found in 16-bit runs exactly as in float32, and a
16-bit kernel's arithmetic is the GPU's: a bfloat16/float16 ``x + y`` equals PyTorch's bit for bit
(a sum rounded once to nearest even) and not a wrongly computed reference.
"""
import pytest
import torch

import tritonkit

import embedding as em
import layer_norm as ln
import matmul as mm
import softmax as sm
import tensor_descriptor as td
import vector_add as va

DTYPES = ["bfloat16", "float16"]
MODULES = {"vector_add": va, "softmax": sm, "layer_norm": ln, "matmul": mm, "embedding": em,
           "tensor_descriptor": td}
# the launcher each main() calls
LAUNCHERS = {"vector_add": "add", "softmax": "softmax", "layer_norm": "layer_norm", "matmul": "matmul",
             "embedding": "embedding", "tensor_descriptor": "bias_relu"}
# small sizes with partial blocks and tails (a strided input where the example takes one)
SMALL = {
    "vector_add": ["--n", "1000"],
    "softmax": ["--rows", "9", "--cols", "33", "--pad", "15"],
    "layer_norm": ["--rows", "7", "--cols", "100"],
    "matmul": ["--m", "33", "--n", "17", "--k", "40"],
    "embedding": ["--batch", "2", "--seq", "9", "--vocab", "50", "--dim", "40"],
    "tensor_descriptor": ["--m", "45", "--n", "40", "--pad", "8"],  # 16-bit rows: multiples of 8
}


def checked(fn, *args, **kwargs):
    """Call ``fn`` inside a check session; return (its result, the session)."""
    with tritonkit.checking() as session:
        result = fn(*args, **kwargs)
    return result, session


def spy_launcher(monkeypatch, name, corrupt=False):
    """Wrap the launcher ``name``'s main() calls; record the dtypes of its tensor arguments and of
    its result, and with ``corrupt`` add 1 to the result's first element. Returns the record."""
    module = MODULES[name]
    launcher = getattr(module, LAUNCHERS[name])
    calls = []

    def wrapper(*args, **kwargs):
        result = launcher(*args, **kwargs)
        out = result[0] if isinstance(result, tuple) else result
        calls.append(({a.dtype for a in args if a.is_floating_point()}, out.dtype))
        if corrupt:
            out.view(-1)[0] += 1
        return result

    monkeypatch.setattr(module, LAUNCHERS[name], wrapper)
    return calls


# --- every example, correct version, both 16-bit dtypes -------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_main_low_precision_is_clean_and_matches(name, dtype, monkeypatch, capsys):
    calls = spy_launcher(monkeypatch, name)
    # main() raises AssertionError if the result misses PyTorch's by more than the dtype's tolerance
    err, s = checked(MODULES[name].main, SMALL[name] + ["--dtype", dtype])
    assert s.findings == []
    assert f"dtype={dtype} bug=none: max abs error" in capsys.readouterr().out
    # the kernel really ran on 16-bit tensors and produced one
    assert calls == [({getattr(torch, dtype)}, getattr(torch, dtype))]
    assert 0 <= err < 0.1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_main_low_precision_check_fails_on_a_wrong_result(name, dtype, monkeypatch, capsys):
    spy_launcher(monkeypatch, name, corrupt=True)
    with pytest.raises(AssertionError):
        checked(MODULES[name].main, SMALL[name] + ["--dtype", dtype])
    assert f"dtype={dtype} bug=none: max abs error" in capsys.readouterr().out


def test_main_rejects_unknown_dtypes():
    for module in MODULES.values():
        with pytest.raises(SystemExit):
            module.main(["--dtype", "float64"])


# --- vector_add's bugs are found at 16 bits exactly as at 32 -------------------------------------
def _describe(findings):
    return [(f.kind, f.line, f.arg, f.access, f.reason, f.masked, f.elements, f.count, f.program_ids)
            for f in findings]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bug", ["missing_mask", "stale_even"])
def test_vector_add_bug_found_as_in_float32(bug, dtype, capsys):
    _, ref = checked(va.main, ["--bug", bug])
    _, s = checked(va.main, ["--bug", bug, "--dtype", dtype])
    assert len(s.findings) == 3 and {f.kind for f in s.findings} == {"out_of_bounds"}
    assert _describe(s.findings) == _describe(ref.findings)
    assert [f.tensor["dtype"] for f in ref.findings] == ["float32"] * 3
    assert [f.tensor["dtype"] for f in s.findings] == [dtype] * 3
    assert f"dtype={dtype} bug={bug}: max abs error" in capsys.readouterr().out


# --- 16-bit arithmetic: torch's, bit for bit, and a wrong reference is told apart ----------------
def _inputs(dtype, n=4099):
    gen = torch.Generator().manual_seed(7)
    return torch.randn(n, generator=gen).to(dtype), (3 * torch.randn(n, generator=gen)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_vector_add_low_precision_is_torch_bit_for_bit(dtype):
    x, y = _inputs(dtype)
    out, s = checked(va.add, x, y)
    assert s.findings == [] and out.dtype == dtype
    assert torch.equal(out.view(torch.int16), (x + y).view(torch.int16))

    # the same sum rounded toward zero is a different answer: the interpreter rounds to nearest
    # even, like the GPU and torch, and does not truncate
    exact = x.double() + y.double()  # exact for these inputs
    truncated = torch.where(out.double().abs() > exact.abs(), torch.nextafter(out, torch.zeros_like(out)), out)
    assert ((truncated.double() - exact).abs() < (out.double() - exact).abs()).sum() == 0
    differ = out != truncated
    assert differ.any() and (~differ).any()
    with pytest.raises(AssertionError):
        torch.testing.assert_close(out, truncated, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_vector_add_low_precision_differs_from_adding_bit_patterns(dtype):
    x, y = _inputs(dtype)
    out, _ = checked(va.add, x, y)
    # adds the raw 16-bit patterns: what Triton's own CPU interpreter computes for bfloat16 operands
    wrong = (x.view(torch.int16) + y.view(torch.int16)).view(dtype)
    torch.testing.assert_close(out, x + y, atol=0, rtol=0)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(out, wrong)
