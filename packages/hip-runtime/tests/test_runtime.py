"""ModelRuntime: load, memory accounting, KV cache, scratch arena, ops on loaded weights, and
close() releasing everything. Runs on the cpu platform and, marked gpu, on nvidia."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device, DeviceBuffer
from hip_runtime import FormatError, ModelRuntime


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
