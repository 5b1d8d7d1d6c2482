"""rope_and_cache against hip_runtime.testing's rope and a numpy scatter, under hypothesis:
queries and keys rotated in place (rotate-half and interleaved, partial rotary, each dtype),
given as column views of one fused QKV product or as tensors of their own; keys and values
stored at device rows, a row of -1 or past the table storing nothing and every other row left
as it was. Bad arguments raise ValueError with nothing queued, on the checked path and on a
plan's path (the same layouts at new addresses). KVCache.reserve and tables, which a decoder
hands it. On the cpu platform in CI; the same tests run on nvidia (marked gpu)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, KVCache, testing
from hip_runtime.ops.plans import plan_key

SETTINGS = settings(
    max_examples=25, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
SENTINEL = 7.0  # what the tables hold before a call: rows not stored keep it


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def qkv_views(backend: HipBackend, qkv: np.ndarray, heads: int, kv_heads: int) -> Any:
    """q [T, heads, D], k and v [T, kv_heads, D] as column views of one device [T, W]."""
    tokens, d = qkv.shape[0], qkv.shape[1] // (heads + 2 * kv_heads)
    fused = backend.from_numpy(qkv)
    q_end, k_end = heads * d, (heads + kv_heads) * d
    return fused, (
        fused[:, :q_end].reshape(tokens, heads, d),
        fused[:, q_end:k_end].reshape(tokens, kv_heads, d),
        fused[:, k_end:].reshape(tokens, kv_heads, d),
    )


@SETTINGS
@given(data=st.data())
def test_rotates_in_place_and_stores_rows(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    tokens = data.draw(st.integers(1, 9))  # (the rows each token stores to are distinct)
    kv_heads = data.draw(st.integers(1, 3))
    heads = kv_heads * data.draw(st.sampled_from([1, 2, 4]))
    d = data.draw(st.sampled_from([2, 8, 32, 64, 96]))
    rot = data.draw(st.sampled_from(sorted({2, d // 2 + d // 2 % 2, d})))
    interleaved = data.draw(st.booleans())
    fused = data.draw(st.booleans())
    max_position, table_rows = 20, data.draw(st.integers(1, 12))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cos, sin = testing.rope_tables(max_position, rot)
    positions = rng.integers(0, max_position, tokens).astype(np.int32)
    # Distinct rows (two tokens storing one row race: the caller's mistake), with rows that
    # store nothing (-1, past the table) among them.
    candidates = np.array([*range(table_rows), *[-1, table_rows] * tokens], np.int32)
    rows = rng.permutation(candidates)[:tokens]
    qkv = testing.random(rng, (tokens, (heads + 2 * kv_heads) * d), dtype)
    if fused:
        _, (q, k, v) = qkv_views(backend, qkv, heads, kv_heads)
    else:
        parts = np.split(qkv, [heads * d, (heads + kv_heads) * d], axis=1)
        q, k, v = (backend.from_numpy(np.ascontiguousarray(p)).reshape(tokens, -1, d)
                   for p in parts)  # fmt: skip
    empty = np.full((table_rows, kv_heads, d), SENTINEL, qkv.dtype)
    k_table, v_table = backend.from_numpy(empty), backend.from_numpy(empty)
    backend.rope_and_cache(
        q, k, v, backend.from_numpy(cos), backend.from_numpy(sin), backend.from_numpy(positions),
        k_table, v_table, backend.from_numpy(rows), rot_dim=rot, interleaved=interleaved,
    )  # fmt: skip
    q_in, k_in, v_in = np.split(qkv, [heads * d, (heads + kv_heads) * d], axis=1)
    shape = (tokens, -1, d)
    q_rot = testing.rope(q_in.reshape(shape), cos, sin, positions, rot_dim=rot,
                         interleaved=interleaved)  # fmt: skip
    k_rot = testing.rope(k_in.reshape(shape), cos, sin, positions, rot_dim=rot,
                         interleaved=interleaved)  # fmt: skip
    testing.assert_close(q.to_numpy(), q_rot, dtype)
    testing.assert_close(k.to_numpy(), k_rot, dtype)
    testing.assert_bits_equal(v.to_numpy(), v_in.reshape(shape))  # v is only read
    keys = np.full(empty.shape, SENTINEL)
    values = np.full(empty.shape, SENTINEL)
    for t, row in enumerate(rows):
        if 0 <= row < table_rows:
            keys[row], values[row] = k_rot[t], v_in.reshape(shape)[t]
    testing.assert_close(k_table.to_numpy(), keys, dtype)
    testing.assert_bits_equal(v_table.to_numpy(), values.astype(qkv.dtype))


def arguments(backend: HipBackend, tokens: int = 3, heads: int = 4, kv_heads: int = 2,
              d: int = 8) -> dict[str, Any]:  # fmt: skip
    """A valid call's arguments (f32, fused views, rows 0..tokens-1), by name."""
    rng = np.random.default_rng(0)
    cos, sin = testing.rope_tables(16, d)
    qkv = testing.random(rng, (tokens, (heads + 2 * kv_heads) * d), "f32")
    _, (q, k, v) = qkv_views(backend, qkv, heads, kv_heads)
    table = np.full((8, kv_heads, d), SENTINEL, np.float32)
    return dict(
        q=q, k=k, v=v, cos=backend.from_numpy(cos), sin=backend.from_numpy(sin),
        positions=backend.from_numpy(np.arange(tokens, dtype=np.int32)),
        k_table=backend.from_numpy(table), v_table=backend.from_numpy(table),
        rows=backend.from_numpy(np.arange(tokens, dtype=np.int32)),
    )  # fmt: skip


def call(backend: HipBackend, args: dict[str, Any], **kwargs: Any) -> None:
    tensors = {name: value for name, value in args.items() if name != "rot_dim"}
    backend.rope_and_cache(*tensors.values(), rot_dim=args.get("rot_dim"), **kwargs)


BAD = {
    "q and k overlap": lambda b, a: OVERLAPS["q and k"][1](b, a),
    "q in the table": lambda b, a: OVERLAPS["q in the table"][1](b, a),
    "the tables overlap": lambda b, a: OVERLAPS["the tables"][1](b, a),
    "dtype": lambda b, a: {**a, "v_table": b.zeros((8, 2, 8), np.float16)},
    "table shape": lambda b, a: {**a, "v_table": b.zeros((8, 2, 4), np.float32)},
    "rows dtype": lambda b, a: {**a, "rows": b.zeros((3,), np.int64)},
    "rows length": lambda b, a: {**a, "rows": b.zeros((2,), np.int32)},
    "positions": lambda b, a: {**a, "positions": b.zeros((2,), np.int32)},
    "v is k": lambda b, a: {**a, "v": a["k"]},
    "positions in a table": lambda b, a: {
        **a,
        "positions": a["k_table"].reshape(-1)[:3].view(np.int32),
    },
    "rot_dim": lambda b, a: {**a, "rot_dim": 8.0},
    "strided last axis": lambda b, a: {**a, "v": b.zeros((3, 2, 16), np.float32)[:, :, ::2]},
    "broadcast q": lambda b, a: {**a, "q": b.zeros((1, 4, 8), np.float32).expand(3, 4, 8)},
    "k heads": lambda b, a: {**a, "k": b.zeros((3, 1, 8), np.float32)},
    "tables": lambda b, a: {**a, "cos": b.zeros((16, 3), np.float32)},
}


def unchanged_after_refusal(backend: HipBackend, args: dict[str, Any]) -> None:
    """The call raises ValueError and leaves q, k and the tables as they were."""
    before = [args[name].to_numpy() for name in ("q", "k", "k_table", "v_table")]
    with pytest.raises(ValueError):
        call(backend, args)
    after = [args[name].to_numpy() for name in ("q", "k", "k_table", "v_table")]
    for old, new in zip(before, after, strict=True):
        testing.assert_bits_equal(new, old)


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_arguments_raise_before_anything_is_queued(backend: HipBackend, bad: str) -> None:
    unchanged_after_refusal(backend, BAD[bad](backend, arguments(backend)))


#: Overlaps whose layouts a valid call also has (so the bad call finds its plan): the valid
#: call's arguments, and the bad call's from them.
OVERLAPS = {
    "q and k": (lambda b: arguments(b), lambda b, a: {**a, "k": a["q"][:, :2]}),
    "q in the table": (
        lambda b: {**arguments(b), "q": b.zeros((3, 4, 8), np.float32)},
        lambda b, a: {**a, "q": a["k_table"].reshape(-1)[:96].reshape(3, 4, 8)},
    ),
    "the tables": (lambda b: arguments(b), lambda b, a: {**a, "v_table": a["k_table"]}),
    # (a float rot_dim equal to the int one: refused, never served the int's plan)
    "rot_dim 8.0": (lambda b: {**arguments(b), "rot_dim": 8}, lambda b, a: {**a, "rot_dim": 8.0}),
}


@pytest.mark.parametrize("overlap", list(OVERLAPS))
def test_overlaps_raise_on_a_plans_path(backend: HipBackend, overlap: str) -> None:
    """After a valid call made the plan of these layouts, an overlap of addresses (what a
    plan's key cannot hold) still raises with nothing queued."""
    valid, bad = OVERLAPS[overlap]
    call(backend, valid(backend))
    args = bad(backend, valid(backend))
    order = ("q", "k", "v", "cos", "sin", "positions", "rows", "k_table", "v_table")
    rot = 8 if "rot_dim" in args else None
    tensors = (*(args[name] for name in order), None)  # (rms_of: none)
    key = ("rope_and_cache", *plan_key(*tensors, None), rot, False, None)
    assert key in (backend._plans or {})  # the bad call's layouts have the valid call's plan
    unchanged_after_refusal(backend, args)


def test_a_plan_serves_new_addresses(backend: HipBackend) -> None:
    """The second call of one layout (a plan's) on other tensors reads and writes those."""
    first, second = arguments(backend), arguments(backend)
    call(backend, first)
    rows = np.array([5, -1, 7], np.int32)
    second["rows"] = backend.from_numpy(rows)
    k_in = second["k"].to_numpy()
    call(backend, second)
    cos, sin = (second[name].to_numpy() for name in ("cos", "sin"))
    k_rot = testing.rope(k_in, cos, sin, np.arange(3))
    table = second["k_table"].to_numpy()
    testing.assert_close(table[[5, 7]], k_rot[[0, 2]], "f32")
    assert (np.delete(table, [5, 7], axis=0) == SENTINEL).all()
    assert (first["k_table"].to_numpy()[3:] == SENTINEL).all()  # the first call's rows only


def test_kv_cache_reserve_and_tables(device: Device, backend: HipBackend) -> None:
    """reserve counts tokens like append and names their rows (b · max_tokens + slot, -1 for a
    masked token); tables and view are the same memory, made once per layer."""
    cache = KVCache(device, backend.stream, layers=2, max_tokens=4, kv_heads=2, head_dim=8,
                    dtype=np.float32, batch=2)  # fmt: skip
    with cache:
        rows = cache.reserve(1, 3, np.array([[0, 1, 1], [1, 1, 1]]))
        assert rows.to_numpy().tolist() == [-1, 0, 1, 4, 5, 6]
        assert cache.lengths.tolist() == [[0, 0], [2, 3]]
        assert cache.reserve(1, 1).to_numpy().tolist() == [2, 7]
        with pytest.raises(ValueError, match="do not fit"):
            cache.reserve(1, 1)
        assert cache.lengths.tolist() == [[0, 0], [3, 4]]  # nothing counted by the refusal
        keys, values = cache.tables(1)
        assert keys.shape == (8, 2, 8) and keys.is_contiguous
        assert cache.tables(1)[0] is keys and cache.view(1)[1] is cache.view(1)[1]
        args = arguments(backend, tokens=2)
        rows = backend.from_numpy(np.array([6, 1], np.int32))
        args.update(k_table=keys, v_table=values, rows=rows)
        v_in = args["v"].to_numpy()
        call(backend, args)
        viewed = cache.view(1)[1].to_numpy()  # [batch, kv_heads, max_tokens, head_dim]
        testing.assert_bits_equal(viewed[1, :, 2], v_in[0])  # row 6: sequence 1, slot 2
        testing.assert_bits_equal(viewed[0, :, 1], v_in[1])  # row 1: sequence 0, slot 1
        with pytest.raises(ValueError, match="tokens must be"):
            cache.reserve(0, -1)


def test_no_tokens_queue_nothing(backend: HipBackend) -> None:
    args = arguments(backend)
    empty = {name: args[name][:0] if name in ("q", "k", "v", "positions", "rows") else args[name]
             for name in args}  # fmt: skip
    call(backend, empty)
    assert (args["k_table"].to_numpy() == SENTINEL).all()


def test_rope_takes_numpy_ints_for_rot_dim(backend: HipBackend) -> None:
    cos, sin = testing.rope_tables(4, 4)
    x = np.ones((2, 1, 8), np.float32)
    got = backend.rope(backend.from_numpy(x), backend.from_numpy(cos), backend.from_numpy(sin),
                       rot_dim=np.int64(4))  # fmt: skip
    testing.assert_close(got.to_numpy(), testing.rope(x, cos, sin, np.arange(2), rot_dim=4), "f32")


class _Item:
    itemsize = 2


class _Heads:
    """The attributes `layout._period` and `_aliased` read of a [tokens, heads, D] tensor, and
    the element offsets it covers (the exact answer the test compares with)."""

    def __init__(self, element: int, shape: tuple[int, int, int], strides: tuple[int, ...]):
        self.ptr, self.shape, self.strides, self.dtype = element * 2, shape, strides, _Item
        self.elements = {element + sum(i * s for i, s in zip(index, strides, strict=True))
                         for index in np.ndindex(*shape)}  # fmt: skip

    def span(self) -> tuple[int, int]:
        return min(self.elements) * 2, (max(self.elements) + 1) * 2


@settings(max_examples=400, deadline=None, database=None)
@given(data=st.data())
def test_the_overlap_test_of_q_k_v_misses_no_shared_element(data: Any) -> None:
    """q, k, v as random [tokens, heads, D] layouts near each other (some the column views of
    one fused product): every pair that shares an element is refused, and the fused views,
    which share none, are not."""
    from hip_runtime.ops import layout

    tokens, d = data.draw(st.integers(1, 4)), data.draw(st.sampled_from([1, 2, 4]))
    stride = data.draw(st.integers(1, 24))
    views = [
        _Heads(1000 + data.draw(st.integers(-30, 30)), (tokens, data.draw(st.integers(1, 3)), d),
               (stride, data.draw(st.sampled_from([d, d + 1, 2 * d])), 1))
        for _ in range(3)
    ]  # fmt: skip
    fused = data.draw(st.booleans())
    if fused:  # the fused product's column views: disjoint
        heads = [data.draw(st.integers(1, 3)) for _ in range(3)]
        starts = np.cumsum([0, *heads]) * d
        views = [_Heads(1000 + int(starts[i]), (tokens, heads[i], d),
                        (int(starts[-1]), d, 1)) for i in range(3)]  # fmt: skip
    tensors = (*views, None, None, None, None, None, None, None)
    found = layout._aliased(tensors, *layout._layouts(tensors))  # type: ignore[arg-type]
    if any(views[i].elements & views[j].elements for i, j in layout._HEADS):
        assert found is not None
    if fused:
        assert found is None
