"""ModelRuntime: load, memory accounting, KV cache, scratch arena, ops on loaded weights, and
close() releasing everything. Runs on the cpu platform and, marked gpu, on nvidia."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device, DeviceBuffer
from hip_runtime import FormatError, KVCache, ModelRuntime


@pytest.fixture
def model(
    tmp_path: Path, save_safetensors: Callable[..., Path]
) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng()
    tensors = {
        "w": rng.standard_normal((64, 48)).astype(np.float32),
        "b": rng.standard_normal(64).astype(np.float32),
        "norm": rng.standard_normal(48).astype(ml_dtypes.bfloat16),
    }
    return save_safetensors(tmp_path / "model.safetensors", tensors), tensors


def test_load_ops_memory_and_close(
    device: Device, model: tuple[Path, dict[str, np.ndarray]], allocations: list[DeviceBuffer]
) -> None:
    path, tensors = model
    runtime = ModelRuntime.load(path, device)
    for name, array in tensors.items():
        assert runtime.weights[name].to_numpy().tobytes() == array.tobytes()
    assert runtime.load_report is not None and runtime.load_report.tensors == 3
    x = np.random.default_rng().standard_normal((5, 48)).astype(np.float32)
    y = runtime.backend.linear(
        runtime.backend.from_numpy(x), runtime.weights["w"], runtime.weights["b"]
    ).to_numpy()
    expected = x.astype(np.float64) @ tensors["w"].T.astype(np.float64) + tensors["b"]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    memory = runtime.memory()
    assert set(memory) == {"weights", "kv_cache", "scratch", "activations"}
    assert memory["weights"] >= sum(a.nbytes for a in tensors.values())
    assert memory["kv_cache"] == memory["scratch"] == 0
    runtime.allocate_kv_cache(layers=2, max_tokens=16, kv_heads=2, head_dim=8)
    runtime.reserve_scratch(1 << 16)
    memory = runtime.memory()
    assert memory["kv_cache"] == 2 * 2 * 16 * 2 * 8 * 2 and memory["scratch"] == 1 << 16
    runtime.close()
    runtime.close()
    assert runtime.weights == {} and all(b.closed for b in allocations)
    with pytest.raises(ValueError, match="closed"):
        runtime.reserve_scratch(10)


def test_failed_load_leaves_nothing(
    device: Device, tmp_path: Path, allocations: list[DeviceBuffer]
) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((4).to_bytes(8, "little") + b"[1]!")
    with pytest.raises(FormatError):
        ModelRuntime.load(bad, device)
    with pytest.raises(FileNotFoundError):
        ModelRuntime.load(tmp_path / "missing.safetensors", device)
    assert all(b.closed for b in allocations)


def test_loading_the_same_names_twice_is_refused(
    device: Device, model: tuple[Path, dict[str, np.ndarray]], allocations: list[DeviceBuffer]
) -> None:
    path, _ = model
    with ModelRuntime.load(path, device) as runtime:
        held = len([b for b in allocations if not b.closed])
        with pytest.raises(ValueError, match="already loaded"):
            runtime.load_weights(path)
        with pytest.raises(ValueError, match="stream= is not an option"):
            runtime.load_weights(path, stream=device.default_stream)
        assert len([b for b in allocations if not b.closed]) == held
    assert all(b.closed for b in allocations)


def test_kv_cache_append_view_reset(device: Device) -> None:
    runtime = ModelRuntime(device=device)
    cache = runtime.allocate_kv_cache(layers=3, max_tokens=10, kv_heads=2, head_dim=4)
    rng = np.random.default_rng()
    backend = runtime.backend
    chunks = [rng.standard_normal((n, 2, 4)).astype(np.float16) for n in (4, 1, 5)]
    for chunk in chunks:
        length = cache.append(1, backend.from_numpy(chunk), backend.from_numpy(-chunk))
    assert length == 10 and cache.lengths == [0, 10, 0]
    keys, values = cache.view(1)
    np.testing.assert_array_equal(keys.to_numpy(), np.concatenate(chunks))
    np.testing.assert_array_equal(values.to_numpy(), -np.concatenate(chunks))
    assert cache.view(0)[0].shape == (0, 2, 4)
    one = backend.from_numpy(chunks[1])
    with pytest.raises(ValueError, match="do not fit"):
        cache.append(1, one, one)
    with pytest.raises(ValueError, match="expected"):
        cache.append(0, backend.from_numpy(chunks[1].astype(np.float32)), one)
    with pytest.raises(ValueError, match="differ"):
        cache.append(0, one, backend.from_numpy(chunks[0]))
    with pytest.raises(ValueError, match="layer must be"):
        cache.view(3)
    cache.reset()
    assert cache.lengths == [0, 0, 0]
    cache.append(1, one, one)
    np.testing.assert_array_equal(cache.view(1)[0].to_numpy(), chunks[1])
    runtime.close()
    assert cache.closed
    with pytest.raises(ValueError, match="closed"):
        cache.view(0)


def test_kv_cache_arguments(device: Device) -> None:
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        KVCache(device, device.default_stream, layers=1, max_tokens=0, kv_heads=1, head_dim=1)


def test_scratch_arena(device: Device) -> None:
    with ModelRuntime(device=device) as runtime:
        scratch = runtime.reserve_scratch(4096)
        a = scratch.tensor((10,), np.float32)
        b = scratch.tensor((3, 3), np.float16)
        assert b.ptr - a.ptr == 256 and scratch.used == 256 + 18
        with pytest.raises(ValueError, match="full"):
            scratch.tensor((4000,), np.float32)
        scratch.reset()
        assert scratch.tensor((1,), np.int8).ptr == a.ptr and scratch.peak == 256 + 18
        with pytest.raises(ValueError, match="positive size"):
            runtime.reserve_scratch(0)
