"""Embedding lookup ``out[t, :] = weight[ids[t], :]``: an indirect (gathered) load.

The grid is 2-D: tiles of ``BLOCK_T`` tokens by ``BLOCK_D`` embedding columns. Each program
loads its token ids, then the rows ``weight_ptr + ids * weight_row_stride`` of the table. The
kernel trusts the ids, as embedding kernels do: an id outside ``[0, vocab_size)`` in the input
is a bug in the program's data, and the gather then reads outside the table. The table may be
float32, bfloat16 or float16 (``--dtype``): rows are copied, so the result is exact in any dtype.

Buggy variants (``--bug``); the first two are bad *inputs*, the kernel is the same:

* ``bad_index``: one id equals ``vocab_size`` (an off-by-one vocabulary, or a special token added
  to the tokenizer but not to the table): the gather reads the row just past the end of ``weight``.
* ``negative_index``: the tail of one sequence is padded with ``-100`` (labels' ``ignore_index``
  used as input ids): the gather reads before the start of ``weight``.
* ``int32_offsets``: a kernel variant that does not cast the ids to int64, as kernels written for
  small vocabularies do: with int32 ids, ``ids * weight_row_stride`` is computed in int32. The
  script feeds it int32 ids of which one is ``140_000`` (a 150k-vocabulary tokenizer's id, given
  to a table built for a small vocabulary) with ``--dim 16384``: ``140_000 * 16_384`` is more
  than ``2**31`` and the product wraps. On a real ``150_000 x 16_384`` table, whose ids are all
  valid, the same wrap happens for every id from ``131_072`` on: the offset becomes negative and
  the gather reads gigabytes before the table instead of the row it wants (silently, if that
  memory is mapped). tritonkit reports the overflow where the product is made, without needing a
  2 GiB table: the table here is ``256 x 16_384`` (16 MiB). The wrapped address is also outside
  this small table, which tritonkit reports at the load. (Run this variant under ``tritonkit
  check``: in Triton's own CPU interpreter the wild read crashes the process.)

Run::

    python examples/embedding.py --batch 4 --seq 37 --vocab 500 --dim 96
    python examples/embedding.py --dtype bfloat16
    tritonkit check -- python examples/embedding.py --bug bad_index
    tritonkit check -- python examples/embedding.py --bug int32_offsets
"""
from __future__ import annotations

import argparse
import os

import torch

if __name__ == "__main__" and not torch.cuda.is_available():
    # No GPU: run in Triton's CPU interpreter (must be set before the kernels are decorated).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BUGS = ("none", "bad_index", "negative_index", "int32_offsets")
DTYPES = ("float32", "bfloat16", "float16")


@triton.jit
def _embedding_fwd_kernel(
    ids_ptr, weight_ptr, out_ptr, n_tokens, embed_dim, weight_row_stride, out_row_stride,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    tok = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    tok_mask = tok < n_tokens
    ids = tl.load(ids_ptr + tok, mask=tok_mask, other=0).to(tl.int64)
    mask = tok_mask[:, None] & (cols[None, :] < embed_dim)
    row_ptrs = weight_ptr + ids[:, None] * weight_row_stride + cols[None, :]
    rows = tl.load(row_ptrs, mask=mask, other=0.0)  # REPORTED: bad_index, negative_index
    tl.store(out_ptr + tok[:, None].to(tl.int64) * out_row_stride + cols[None, :], rows, mask=mask)


@triton.jit
def _embedding_fwd_kernel_int32(
    ids_ptr, weight_ptr, out_ptr, n_tokens, embed_dim, weight_row_stride, out_row_stride,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    tok = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    tok_mask = tok < n_tokens
    ids = tl.load(ids_ptr + tok, mask=tok_mask, other=0)  # BUG: int32_offsets (no .to(tl.int64))
    mask = tok_mask[:, None] & (cols[None, :] < embed_dim)
    row_ptrs = weight_ptr + ids[:, None] * weight_row_stride + cols[None, :]  # REPORTED: int32_offsets
    rows = tl.load(row_ptrs, mask=mask, other=0.0)  # REPORTED: int32_offsets
    tl.store(out_ptr + tok[:, None].to(tl.int64) * out_row_stride + cols[None, :], rows, mask=mask)


def embedding(ids: torch.Tensor, weight: torch.Tensor, block_t: int = 32, block_d: int = 64,
              bug: str = "none") -> torch.Tensor:
    """Look up rows of an embedding table.

    Args:
        ids: integer (int32/int64) tensor of any shape; every id must be in ``[0, vocab_size)``
            (not checked on the host: a bad id makes the kernel read outside ``weight``).
        weight: ``(vocab_size, embed_dim)`` table whose last dimension is contiguous.
        block_t, block_d: tokens and columns per program (powers of two).
        bug: ``"int32_offsets"`` runs the kernel variant that computes row offsets in the ids'
            dtype; any other name in :data:`BUGS` runs the correct kernel (those bugs are in the ids).

    Returns:
        a new contiguous tensor of shape ``(*ids.shape, embed_dim)`` and ``weight``'s dtype.

    Raises:
        ValueError: if ``ids`` is not an integer tensor, ``weight`` is not a 2-D table with a
            contiguous last dimension, or ``bug`` is unknown.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    if ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"ids must be int32 or int64, got {ids.dtype}")
    if weight.dim() != 2 or weight.stride(1) != 1:
        raise ValueError(f"weight must be 2-D with a contiguous last dimension, got shape "
                         f"{tuple(weight.shape)} strides {weight.stride()}")
    flat = ids.reshape(-1).contiguous()
    n_tokens = flat.numel()
    embed_dim = weight.shape[1]
    out = torch.empty((n_tokens, embed_dim), dtype=weight.dtype, device=weight.device)
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(embed_dim, block_d))
    kernel = _embedding_fwd_kernel_int32 if bug == "int32_offsets" else _embedding_fwd_kernel
    kernel[grid](flat, weight, out, n_tokens, embed_dim, weight.stride(0), out.stride(0),
                 BLOCK_T=block_t, BLOCK_D=block_d)
    return out.reshape(*ids.shape, embed_dim)


def make_ids(batch: int, seq: int, vocab: int, bug: str = "none", seed: int = 0) -> torch.Tensor:
    """Random token ids, with the data bug ``bug`` planted.

    Args:
        batch, seq: the shape of the ids.
        vocab: ids are drawn from ``[0, vocab)``.
        bug: ``"none"``; ``"bad_index"`` sets ``ids[1, 5] = vocab`` (needs ``batch >= 2``,
            ``seq >= 6``); ``"negative_index"`` sets ``ids[2, seq - 7:] = -100`` (needs
            ``batch >= 3``, ``seq >= 7``); ``"int32_offsets"`` sets ``ids[1, 3] = 140_000`` (needs
            ``batch >= 2``, ``seq >= 4``).
        seed: seed of the random generator (the ids are deterministic).

    Returns:
        a CPU int64 tensor of shape ``(batch, seq)``.

    Raises:
        ValueError: if ``bug`` is unknown or the shape is too small to plant it.
    """
    if bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {BUGS}")
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    if bug == "bad_index":
        if batch < 2 or seq < 6:
            raise ValueError("bad_index needs batch >= 2 and seq >= 6")
        ids[1, 5] = vocab  # BUG: bad_index
    elif bug == "negative_index":
        if batch < 3 or seq < 7:
            raise ValueError("negative_index needs batch >= 3 and seq >= 7")
        ids[2, seq - 7:] = -100  # BUG: negative_index
    elif bug == "int32_offsets":
        if batch < 2 or seq < 4:
            raise ValueError("int32_offsets needs batch >= 2 and seq >= 4")
        ids[1, 3] = 140_000  # an id of a 150k vocabulary
    return ids


def main(argv=None) -> float:
    """Run :func:`embedding` on random ids, compare with ``torch.nn.functional.embedding``.

    The reference covers only the valid ids (PyTorch raises on the others). With ``--bug
    int32_offsets`` the ids are int32 and the defaults are a small batch of 2 x 16 tokens, a
    vocabulary of 256 and ``--dim 16384``.

    Args:
        argv: command-line arguments (None: ``sys.argv[1:]``).

    Returns:
        the max absolute error over the tokens with valid ids.

    Raises:
        AssertionError: if the correct version (``--bug none``) does not copy the rows exactly (the
            buggy variants only print their error: finding them is tritonkit's job).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of the table")
    parser.add_argument("--batch", type=int, default=None, help="default: 4, or 2 for int32_offsets")
    parser.add_argument("--seq", type=int, default=None, help="default: 37, or 16 for int32_offsets")
    parser.add_argument("--vocab", type=int, default=None, help="default: 500, or 256 for int32_offsets")
    parser.add_argument("--dim", type=int, default=None, help="default: 96, or 16384 for int32_offsets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    defaults = (2, 16, 256, 16384) if args.bug == "int32_offsets" else (4, 37, 500, 96)
    for name, default in zip(("batch", "seq", "vocab", "dim"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, default)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(args.seed + 1)
    weight = torch.randn(args.vocab, args.dim, generator=gen).to(device, getattr(torch, args.dtype))
    ids = make_ids(args.batch, args.seq, args.vocab, bug=args.bug, seed=args.seed).to(device)
    if args.bug == "int32_offsets":
        ids = ids.to(torch.int32)
    out = embedding(ids, weight, bug=args.bug)
    valid = (ids >= 0) & (ids < args.vocab)
    ref = torch.nn.functional.embedding(ids[valid], weight)
    err = (out[valid].float() - ref.float()).abs().max().item()
    bad = int((~valid).sum())
    print(f"embedding batch={args.batch} seq={args.seq} vocab={args.vocab} dim={args.dim} dtype={args.dtype} "
          f"bug={args.bug}: max abs error {err:.3g} over valid ids ({bad} invalid ids)")
    if args.bug == "none":
        torch.testing.assert_close(out[valid], ref, rtol=0, atol=0)
    return err


if __name__ == "__main__":
    main()
