"""KVCache: batched appends at each sequence's own length (masked tokens take no slot), the
[B, Hkv, Smax, D] views attention reads, device lengths, reset, and bad arguments. Runs on the
cpu platform and, marked gpu, on nvidia."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import KVCache, ModelRuntime


def test_single_sequence_append_view_reset(device: Device, program_cache: Path) -> None:
    runtime = ModelRuntime(device=device)
    cache = runtime.allocate_kv_cache(layers=3, max_tokens=10, kv_heads=2, head_dim=4)
    rng = np.random.default_rng()
    backend = runtime.backend
    chunks = [rng.standard_normal((n, 2, 4)).astype(np.float16) for n in (4, 1, 5)]
    for chunk in chunks:
        lengths = cache.append(1, backend.from_numpy(chunk), backend.from_numpy(-chunk))
    assert lengths.tolist() == [10] and cache.lengths.tolist() == [[0], [10], [0]]
    keys, values = cache.view(1)
    assert keys.shape == (1, 2, 10, 4) and keys.strides == (80, 4, 8, 1)
    whole = np.concatenate(chunks).transpose(1, 0, 2)
    np.testing.assert_array_equal(keys.to_numpy()[0], whole)
    np.testing.assert_array_equal(values.to_numpy()[0], -whole)
    assert not cache.view(0)[0].to_numpy().any()  # nothing appended: zeros
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
    assert not cache.lengths.any() and not cache.view(1)[0].to_numpy().any()
    cache.append(1, one, one)
    np.testing.assert_array_equal(cache.view(1)[0].to_numpy()[0, :, 0], chunks[1][0])
    runtime.close()
    assert cache.closed
    with pytest.raises(ValueError, match="closed"):
        cache.view(0)


def test_batched_append_skips_masked_tokens(device: Device, program_cache: Path) -> None:
    """Left-padded prompts land at slot 0 of each sequence; the next token at each length."""
    with ModelRuntime(device=device) as runtime:
        backend = runtime.backend
        cache = KVCache(device, backend.stream, layers=2, max_tokens=6, kv_heads=3, head_dim=2,
                        dtype=np.float32, batch=3)  # fmt: skip
        rng = np.random.default_rng(1)
        prompt = rng.standard_normal((3, 4, 3, 2)).astype(np.float32)
        mask = np.array([[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]])
        # strided keys ([B, S, H, D] read from a [B, H, S, D] tensor) are taken as they are
        keys = backend.from_numpy(prompt.transpose(0, 2, 1, 3).copy()).permute(0, 2, 1, 3)
        assert cache.append(0, keys, backend.from_numpy(2 * prompt), mask).tolist() == [4, 2, 1]
        step = rng.standard_normal((3, 1, 3, 2)).astype(np.float32)
        assert cache.append(0, backend.from_numpy(step), backend.from_numpy(step)).tolist() == [
            5, 3, 2,
        ]  # fmt: skip
        k, v = (t.to_numpy() for t in cache.view(0))
        expected = np.zeros((3, 6, 3, 2), np.float32)
        for b in range(3):
            held = np.concatenate([prompt[b][mask[b] == 1], step[b]])
            expected[b, : len(held)] = held
        np.testing.assert_array_equal(k, expected.transpose(0, 2, 1, 3))
        assert cache.kv_lengths(0).to_numpy().tolist() == [5, 3, 2]
        assert cache.kv_lengths(1).to_numpy().tolist() == [0, 0, 0]
        assert not cache.view(1)[1].to_numpy().any()
        assert "10 tokens held" in repr(cache) and v.shape == (3, 3, 6, 2)
        full = np.ones((3, 2, 3, 2), np.float32)
        with pytest.raises(ValueError, match="sequence 0 holds 5 of 6 tokens; 2 more"):
            cache.append(0, backend.from_numpy(full), backend.from_numpy(full))
        with pytest.raises(ValueError, match="mask is"):
            cache.append(0, backend.from_numpy(full), backend.from_numpy(full), np.ones((3, 3)))
        with pytest.raises(ValueError, match="other than 0 and 1"):
            cache.append(0, backend.from_numpy(full), backend.from_numpy(full), 2 * mask[:, :2])
        assert cache.lengths[0].tolist() == [5, 3, 2]  # refused appends changed nothing
        cache.close()


def test_write_at_device_rows_then_advance(device: Device, program_cache: Path) -> None:
    """A decode step's write: rows on the device (b * max_tokens + slot), counted after."""
    with ModelRuntime(device=device) as runtime:
        backend = runtime.backend
        cache = KVCache(device, backend.stream, layers=1, max_tokens=4, kv_heads=1, head_dim=2,
                        dtype=np.float32, batch=2)  # fmt: skip
        new = np.arange(4, dtype=np.float32).reshape(2, 1, 1, 2) + 1
        rows = backend.from_numpy(np.array([2, 4 + 0], np.int32))  # sequence 0 slot 2, 1 slot 0
        cache.write(0, backend.from_numpy(new), backend.from_numpy(-new), rows)
        keys = cache.view(0)[0].to_numpy()
        assert keys[0, 0, 2].tolist() == [1, 2] and keys[1, 0, 0].tolist() == [3, 4]
        assert not cache.lengths.any()  # the host counts only with advance
        cache.advance(3)
        assert cache.lengths.tolist() == [[3, 3]]
        with pytest.raises(ValueError, match="do not fit"):
            cache.advance(2)
        with pytest.raises(ValueError, match="rows must be"):
            cache.write(0, backend.from_numpy(new), backend.from_numpy(new), rows[:1])
        cache.close()


def test_arguments(device: Device) -> None:
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        KVCache(device, device.default_stream, layers=1, max_tokens=0, kv_heads=1, head_dim=1)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        KVCache(device, device.default_stream, layers=1, max_tokens=1, kv_heads=1, head_dim=1,
                batch=0)  # fmt: skip
