"""rmsnorm_linear_rope_and_cache (hip_runtime.ops.gemv_rope, kernels/gemv.hip's
gemv_norm_rope_r1): a decode step's QKV product, rotated and stored in the KV cache in one
launch, against the two ops it fuses (rmsnorm_linear, then rope_and_cache of its views).

The fused kernel rotates the product's values as rounded to the storage type, as
rope_and_cache reads them: the two paths agree to the last bit of the storage type, and
the tables too. On the cpu platform the GEMV kernel is off by default; these tests turn it
on, so the kernel's paths (slices 1, 2 and 4, a row outside the table, a position outside
the rotary table) run here, and with HIP_FFI_CPU_WARP_SIZE=64 under 64-lane warps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops import gemv_rope
from hip_runtime.ops.gemv_rope import qkv_views

HEADS, KV_HEADS, D, HIDDEN, TABLE_ROWS, MAX_POSITION = 4, 2, 16, 64, 6, 10
N = (HEADS + 2 * KV_HEADS) * D
EPS = 1e-5


@pytest.fixture
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, gemv_rows=2) as backend:
        yield backend


def _operands(backend: HipBackend, dtype: str, rows: int, position: int, row: int) -> dict:
    rng = np.random.default_rng(rows * 100 + position)
    angles = rng.uniform(0, 2 * np.pi, (MAX_POSITION, D // 2))
    on = backend.from_numpy
    return {
        "x": on(testing.random(rng, (rows, 1, HIDDEN), dtype)),
        "norm_weight": on(testing.random(rng, HIDDEN, dtype)),
        "weight": on(testing.random(rng, (N, HIDDEN), dtype, scale=0.2)),
        "cos": on(np.cos(angles).astype(np.float32)),
        "sin": on(np.sin(angles).astype(np.float32)),
        "positions": on(np.full(rows, position, np.int32)),
        "rows": on(np.arange(row, row + rows, dtype=np.int32)),
        "tables": [on(testing.random(rng, (TABLE_ROWS, KV_HEADS, D), dtype)) for _ in range(4)],
    }


def _fused(backend: HipBackend, o: dict, tables: list[Any]) -> Any:
    return backend.rmsnorm_linear_rope_and_cache(
        o["x"], o["norm_weight"], o["weight"], o["cos"], o["sin"], o["positions"], *tables,
        o["rows"], heads=HEADS, eps=EPS,
    )  # fmt: skip


def _separate(backend: HipBackend, o: dict, tables: list[Any]) -> Any:
    qkv = backend.rmsnorm_linear(o["x"], o["norm_weight"], o["weight"], eps=EPS)
    q, k, v = qkv_views(qkv, HEADS, KV_HEADS, D)
    backend.rope_and_cache(q, k, v, o["cos"], o["sin"], o["positions"], *tables, o["rows"])
    return qkv


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("slices", [1, 2, 4])
@pytest.mark.parametrize(("position", "row"), [(3, 2), (MAX_POSITION, 5), (7, -1)])
def test_one_row_is_one_launch_equal_to_the_two_ops(
    backend: HipBackend, kernel_launches: list[str], monkeypatch: pytest.MonkeyPatch,
    dtype: str, slices: int, position: int, row: int,
) -> None:  # fmt: skip
    """(A position past the rotary table rotates to zeros; row -1 stores nothing.)"""
    monkeypatch.setattr(gemv_rope, "gemv_slices", lambda *_: slices)
    o = _operands(backend, dtype, 1, position, row)
    fused_tables, separate_tables = o["tables"][:2], o["tables"][2:]
    for mine, theirs in zip(fused_tables, separate_tables, strict=True):
        theirs.copy_from(mine)  # (the same old contents: what is not stored stays)
    for _ in range(2):  # the first call, then its plan
        got = _fused(backend, o, fused_tables)
        expected = _separate(backend, o, separate_tables)
        np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
        for mine, theirs in zip(fused_tables, separate_tables, strict=True):
            np.testing.assert_array_equal(mine.to_numpy(), theirs.to_numpy())
    assert kernel_launches.count(f"gemv_norm_rope_r1_{dtype}") == 1  # (then the plan's)
    assert "rope_and_cache_half_" + dtype in kernel_launches  # (the separate ops' own)
    if position >= MAX_POSITION:
        assert not got.to_numpy()[..., : (HEADS + KV_HEADS) * D].any()


def test_more_rows_run_the_two_ops(backend: HipBackend, kernel_launches: list[str]) -> None:
    o = _operands(backend, "f32", 2, 4, 1)
    got = _fused(backend, o, o["tables"][:2])
    expected = _separate(backend, o, o["tables"][2:])
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
    np.testing.assert_array_equal(o["tables"][0].to_numpy()[1:3], o["tables"][2].to_numpy()[1:3])
    assert not [name for name in kernel_launches if name.startswith("gemv_norm_rope")]


def test_a_captured_call_replays(backend: HipBackend) -> None:
    """Inside a capture the plan's prepared launch declines: the checked launch runs."""
    from hip_runtime.runtime.forward_graph import ForwardGraph

    o = _operands(backend, "bf16", 1, 2, 0)
    tables = o["tables"][:2]
    step = lambda x: _fused(backend, {**o, "x": x}, tables)  # noqa: E731
    expected = step(o["x"]).to_numpy()
    with ForwardGraph(backend, step, o["x"]) as graph:
        np.testing.assert_array_equal(graph(o["x"]).to_numpy(), expected)


@pytest.mark.parametrize(
    ("change", "message"),
    [({"heads": 3}, "need"), ({"heads": 0}, "positive int"), ({"heads": 4.0}, "positive int"),
     ({"eps": "a"}, "eps"), ({"overlap": True}, "overlap")],
)  # fmt: skip
def test_bad_operands_raise_before_anything_runs(
    backend: HipBackend, change: dict, message: str
) -> None:
    o = _operands(backend, "f32", 1, 2, 0)
    tables = list(o["tables"][:2])
    before = tables[0].to_numpy()
    if change.get("overlap"):
        tables = [backend.from_numpy(np.zeros((40, KV_HEADS, D), np.float32)) for _ in "kv"]
        o["x"] = tables[0].reshape(-1)[:HIDDEN].reshape(1, 1, HIDDEN)  # x inside k_table
        before = tables[0].to_numpy()
    error = TypeError if "eps" in change else ValueError
    with pytest.raises(error, match=message):
        backend.rmsnorm_linear_rope_and_cache(
            o["x"], o["norm_weight"], o["weight"], o["cos"], o["sin"], o["positions"], *tables,
            o["rows"], heads=change.get("heads", HEADS), eps=change.get("eps", EPS),
        )  # fmt: skip
    np.testing.assert_array_equal(tables[0].to_numpy(), before)
