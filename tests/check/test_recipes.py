"""Recipes: Triton's front end run once per kind of builtin call under the batched engine, its
builder calls replayed after that (``tritonkit.check.interp.recipes``).

The differential tests (``test_batched``, ``test_shares``) compare every example and bug under the
batched engine, which replays, with the sequential engine, which never does. These tests pin what
they could miss: that replay really happens, that a key tells apart calls whose front end differs
(the same tensor twice, the sign of a zero constant), and that what must not be replayed is not.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

import tritonkit
from tritonkit.check.interp import recipes


@triton.jit
def _squares_and_products(x_ptr, y_ptr, sq_ptr, prod_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(sq_ptr + offs, x * x)  # the same tensor twice ...
    tl.store(prod_ptr + offs, x * y)  # ... then two tensors of the same type: another key


@triton.jit
def _signed_zeros(pos_ptr, neg_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(pos_ptr + offs, tl.full((BLOCK,), 0.0, tl.float32))
    tl.store(neg_ptr + offs, tl.full((BLOCK,), -0.0, tl.float32))


@pytest.fixture
def fresh_recipes():
    saved = dict(recipes._RECIPES)
    recipes._RECIPES.clear()
    yield recipes._RECIPES
    recipes._RECIPES.clear()
    recipes._RECIPES.update(saved)


class _FrontEndCalls:
    """Counts calls of Triton's front end for a binary operation (``binary_op_type_checking_impl``)."""

    def __init__(self, monkeypatch):
        from triton.language import semantic
        self.n = 0
        original = semantic.TritonSemantic.binary_op_type_checking_impl

        def counted(sem, *args, **kwargs):
            self.n += 1
            return original(sem, *args, **kwargs)
        monkeypatch.setattr(semantic.TritonSemantic, "binary_op_type_checking_impl", counted)


@pytest.mark.parametrize("engine", ["auto", "sequential"])
def test_the_batched_engine_replays_and_the_oracle_does_not(engine, fresh_recipes, monkeypatch):
    calls = _FrontEndCalls(monkeypatch)
    x, y = torch.rand(256), torch.rand(256)
    sq, prod = torch.empty(256), torch.empty(256)
    with tritonkit.checking(engine=engine) as s:
        _squares_and_products[(4,)](x, y, sq, prod, BLOCK=64)
        first = calls.n
        _squares_and_products[(4,)](x, y, sq, prod, BLOCK=64)
        second = calls.n - first
    assert not s.findings
    assert first > 0
    if engine == "auto":  # the batched engine
        assert second == 0 and fresh_recipes  # every binary operation of the second launch replayed
    else:
        assert second == first and not fresh_recipes
    assert torch.equal(sq, x * x) and torch.equal(prod, x * y)


def test_the_same_tensor_twice_is_another_key(fresh_recipes):
    x, y = torch.rand(512), torch.rand(512)
    sq, prod = torch.empty(512), torch.empty(512)
    with tritonkit.checking():
        for _ in range(2):  # the second launch replays both
            _squares_and_products[(8,)](x, y, sq, prod, BLOCK=64)
            assert torch.equal(sq, x * x) and torch.equal(prod, x * y)


def test_the_sign_of_a_zero_constant_is_in_the_key(fresh_recipes):
    """Both launches as the oracle makes them (the sign of ``tl.full``'s zero is the front end's
    business: Triton 3.9 keeps it, 3.6 does not); 0.0 and -0.0 are equal, so only the key's sign
    keeps the second one from replaying the first's constant."""
    signs = []
    for engine in ("sequential", "auto", "auto"):
        pos, neg = torch.ones(128), torch.ones(128)
        with tritonkit.checking(engine=engine):
            _signed_zeros[(2,)](pos, neg, BLOCK=64)
        assert torch.equal(pos, torch.zeros(128)) and torch.equal(neg, torch.zeros(128))
        signs.append((torch.signbit(pos).tolist(), torch.signbit(neg).tolist()))
    assert signs[0] == signs[1] == signs[2]


# --- the recorder on a stand-in builder ------------------------------------------------------------
class _Builder:
    """A builder with one operation, counting its calls."""

    replays = True

    def __init__(self):
        self.calls = 0
        self.options = "options"

    def create_fmul(self, a, b):
        self.calls += 1
        return _interp.TensorHandle(a.data * b.data, a.dtype)


class _Semantic:
    def __init__(self, builder):
        self.builder = builder


def _tensor(values):
    return tl.tensor(_interp.TensorHandle(np.asarray(values, np.float32), tl.float32), tl.block_type(tl.float32, [2]))


def _multiply(a, b, _semantic=None):
    """A builtin's stand-in: its front end reads an option, then asks the builder."""
    _semantic.builder.options
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    return tl.tensor(_semantic.builder.create_fmul(a.handle, b.handle), a.type)


def test_a_recorded_call_is_replayed_on_new_handles(fresh_recipes):
    sem = _Semantic(_Builder())
    out = recipes.call(_multiply, (_tensor([1, 2]), _tensor([3, 4])), {}, sem)
    assert out.handle.data.tolist() == [3, 8] and sem.front_end_runs == 1
    out = recipes.call(_multiply, (_tensor([5, 6]), _tensor([7, 8])), {}, sem)
    assert out.handle.data.tolist() == [35, 48] and out.type == tl.block_type(tl.float32, [2])
    assert sem.front_end_runs == 1 and sem.builder.calls == 2


def test_a_changed_builder_attribute_records_again(fresh_recipes):
    sem = _Semantic(_Builder())
    recipes.call(_multiply, (_tensor([1, 2]), _tensor([3, 4])), {}, sem)
    sem.builder = _Builder()
    sem.builder.options = "other options"
    out = recipes.call(_multiply, (_tensor([5, 6]), _tensor([7, 8])), {}, sem)
    assert out.handle.data.tolist() == [35, 48] and sem.front_end_runs == 2


def _reads_data(a, _semantic=None):
    """A front end that reads a value's data (``bool`` of a tensor) to decide what to build."""
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    recipes.read_data()
    return tl.tensor(_semantic.builder.create_fmul(a.handle, a.handle), a.type)


def _builds_without_the_builder(a, _semantic=None):
    """A front end that makes a value itself: nothing the builder could replay."""
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    return tl.tensor(_interp.TensorHandle(a.handle.data + 1, tl.float32), a.type)


@pytest.mark.parametrize("member", [_reads_data, _builds_without_the_builder])
def test_what_cannot_be_replayed_runs_the_front_end_every_time(member, fresh_recipes):
    sem = _Semantic(_Builder())
    first = recipes.call(member, (_tensor([1, 2]),), {}, sem)
    second = recipes.call(member, (_tensor([3, 4]),), {}, sem)
    assert sem.front_end_runs == 2
    assert fresh_recipes and all(r is None for r in fresh_recipes.values())
    assert second.handle.data.tolist() == member(_tensor([3, 4]), _semantic=_Semantic(_Builder())).handle.data.tolist()
    assert first.handle.data.tolist() != second.handle.data.tolist()


class _ConstantsBuilder(_Builder):
    """:class:`_Builder` with a constant maker and a broadcast."""

    def get_fp32(self, v):
        return _interp.TensorHandle(np.array([v], np.float32), tl.float32)

    def create_splat(self, h, shape):
        return _interp.TensorHandle(np.full(shape, h.data[0], np.float32), tl.float32)


def _load_like(a, other, _semantic=None):
    """Triton's ``tl.load`` front end in little: ``other`` made a tensor, then ``if other`` asked
    of its data to decide what the builder is given (``other=0.0``: nothing)."""
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    b = _semantic.builder
    o = tl.tensor(b.create_splat(b.get_fp32(other), [2]), a.type)
    recipes.read_data(o.handle)
    return tl.tensor(b.create_fmul(a.handle, o.handle) if o.handle.data.any() else a.handle, a.type)


def _reads_a_broadcast_argument(a, _semantic=None):
    """Reads the data of a value made from an argument: that depends on the argument's data."""
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    s = _semantic.builder.create_splat(a.handle, [2])
    recipes.read_data(s)
    return tl.tensor(s, a.type)


def test_data_made_from_the_calls_constants_alone_is_replayed(fresh_recipes):
    """What the front end reads of a value made from constants of the key is the same in every call
    with that key: the recording stands, and each constant keeps its own recipe."""
    sem = _Semantic(_ConstantsBuilder())
    for x in ([1, 2], [3, 4]):
        for other in (0.0, 2.0):
            out = recipes.call(_load_like, (_tensor(x), other), {}, sem)
            assert out.handle.data.tolist() == [v * other if other else v for v in x]
    assert sem.front_end_runs == 2  # one recording per key, then replays
    assert len(fresh_recipes) == 2 and all(r is not None for r in fresh_recipes.values())


def test_data_made_from_an_argument_is_not_replayed(fresh_recipes):
    sem = _Semantic(_ConstantsBuilder())
    recipes.call(_reads_a_broadcast_argument, (_tensor([1, 2]),), {}, sem)
    out = recipes.call(_reads_a_broadcast_argument, (_tensor([3, 4]),), {}, sem)
    assert sem.front_end_runs == 2 and all(r is None for r in fresh_recipes.values())
    assert out.handle.data.tolist() == [3, 3]


@triton.jit
def _loads_with_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0))
    tl.store(out_ptr + BLOCK * tl.num_programs(0) + offs, tl.load(x_ptr + offs, mask=m, other=7.0))


def test_masked_loads_with_other_and_stores_are_replayed(fresh_recipes, monkeypatch):
    """``tl.load(..., other=c)`` and masked stores are replayed, each ``c`` from its own recipe."""
    from triton.language import semantic
    loads = []  # front-end runs of loads and stores (Triton 3.6 hands its builder pybind11 enums)
    for name in ("load", "store"):
        original = getattr(semantic.TritonSemantic, name)
        monkeypatch.setattr(semantic.TritonSemantic, name,
                            lambda sem, *a, _f=original, **k: loads.append(1) or _f(sem, *a, **k))
    x = torch.rand(200)
    for launch in range(2):
        out = torch.full((512,), -1.0)
        with tritonkit.checking() as s:
            _loads_with_other[(4,)](x, out, 200, BLOCK=64)
        assert not s.findings
        assert torch.equal(out[:200], x) and torch.equal(out[200:256], torch.zeros(56))
        assert torch.equal(out[256:456], x) and torch.equal(out[456:], torch.full((56,), 7.0))
        if launch == 0:
            recorded = len(loads)
    assert recorded > 0 and len(loads) == recorded  # the second launch ran no front end of a load or store


def test_arguments_that_make_no_key_run_the_front_end(fresh_recipes):
    sem = _Semantic(_Builder())

    def member(a, fn, _semantic=None):
        return _multiply(a, a, _semantic=_semantic)
    def scaled(a, scale, _semantic=None):
        return _multiply(a, a, _semantic=_semantic)
    for _ in range(2):
        recipes.call(member, (_tensor([1, 2]), lambda v: v), {}, sem)  # a function
        recipes.call(scaled, (_tensor([1, 2]),), {"scale": float("nan")}, sem)  # NaN equals no key
    assert sem.front_end_runs == 4 and not fresh_recipes


class _Pointer:
    """A handle that is not a ``TensorHandle`` (as Triton 3.6's block pointers are)."""

    def __init__(self, base):
        self.base = base


class _PointerBuilder(_Builder):
    def create_advance(self, ptr, step):
        self.calls += 1
        return _Pointer(ptr.base + step)


def _advance(p, step, _semantic=None):
    _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
    return tl.tensor(_semantic.builder.create_advance(p.handle, step), p.type)


def test_handles_of_any_class_are_values_of_the_call(fresh_recipes):
    """An argument's handle that is not a ``TensorHandle`` is still the argument's, not a constant
    (Triton 3.6's block pointers: a replayed load read the first launch's pointer)."""
    sem = _Semantic(_PointerBuilder())
    ty = tl.pointer_type(tl.float32)
    assert recipes.call(_advance, (tl.tensor(_Pointer(10), ty), 1), {}, sem).handle.base == 11
    assert recipes.call(_advance, (tl.tensor(_Pointer(20), ty), 1), {}, sem).handle.base == 21
    assert sem.front_end_runs == 1 and sem.builder.calls == 2


def test_an_object_from_elsewhere_is_no_constant(fresh_recipes):
    sem = _Semantic(_PointerBuilder())
    kept = _Pointer(5)  # not an argument's, not a builder result of the call

    def member(a, _semantic=None):
        _semantic.front_end_runs = getattr(_semantic, "front_end_runs", 0) + 1
        _semantic.builder.create_advance(kept, 1)
        return a
    for _ in range(2):
        recipes.call(member, (_tensor([1, 2]),), {}, sem)
    assert sem.front_end_runs == 2 and list(fresh_recipes.values()) == [None]


def test_the_language_is_patched_from_a_plan_made_again_for_other_modules(monkeypatch):
    """Launches set Triton's language from the list the first patching made; where the modules it
    was made for are no longer the ones imported (a reload), it is made again."""
    from tritonkit.check import triton_hooks
    made = []
    original = triton_hooks._patch

    def counted(scope):
        made.append(1)
        original(scope)
    monkeypatch.setattr(triton_hooks, "_patch", counted)
    x, y = torch.rand(64), torch.rand(64)
    sq, prod = torch.empty(64), torch.empty(64)
    with tritonkit.checking():
        _squares_and_products[(1,)](x, y, sq, prod, BLOCK=64)
        _squares_and_products[(1,)](x, y, sq, prod, BLOCK=64)
        before = len(made)
        assert before <= 1  # made at most once (another test's launch may have made it already)
        key = triton_hooks._plan_key()
        monkeypatch.setattr(triton_hooks, "_plan_key", lambda: key + (0,))
        _squares_and_products[(1,)](x, y, sq, prod, BLOCK=64)
        _squares_and_products[(1,)](x, y, sq, prod, BLOCK=64)
    assert len(made) == before + 1  # made again, once, for the new key
    assert torch.equal(sq, x * x) and torch.equal(prod, x * y)


def test_type_keys_are_equal_exactly_for_equal_types():
    key = recipes._type_key
    f32, f16 = tl.float32, tl.float16
    assert key(tl.block_type(f32, [4, 8])) == key(tl.block_type(f32, [4, 8]))  # two objects, one type
    assert key(tl.block_type(f32, [4, 8])) != key(tl.block_type(f32, [8, 4]))
    assert key(tl.block_type(f32, [4])) != key(tl.block_type(f16, [4]))
    assert key(tl.pointer_type(f32)) == key(tl.pointer_type(f32)) != key(tl.pointer_type(f16))
    assert key(tl.block_type(tl.pointer_type(f32), [4])) != key(tl.block_type(f32, [4]))
    t = tl.block_type(f32, [16])
    assert key(t) is key(t)  # looked up the second time
