"""quantized_linear (kernels/gemv_quant_split.hip for weights in the split layout,
kernels/gemv_quant.hip for GGUF's, and dequantize + GEMM beyond GEMV_MAX_ROWS), dequantize and
split_quantized against float64 references of the dequantized weight, under hypothesis: both
encodings, each dtype, both layouts (split where K is a multiple of 256), GGUF blocks at a
2-byte aligned address (the staging kernels' 2-byte copy), 1..17 rows (the row tiles 1, 4,
16 up to GEMV_MAX_ROWS, then dequantize + GEMM), weight rows that do not fill a block, x in
strided and unaligned layouts, every threads-per-row and teams-per-row choice.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.models import llama_weights
from hip_runtime.models.llama_config import LlamaConfig
from hip_runtime.ops import quantized_matmul
from hip_runtime.ops.quantized import split_rows_into
from hip_runtime.ops.quantized_matmul import QuantizedWeight
from hip_runtime.tensors.tensor import DeviceTensor

SETTINGS = settings(
    max_examples=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
QTYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}
TYPES = ("f32", "f16", "bf16")


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def quantized(
    backend: HipBackend, rng: np.random.Generator, n: int, k: int, encoding: str
) -> tuple[QuantizedWeight, np.ndarray]:
    """A random [n, k] weight as GGUF blocks on the device, and its float64 dequantization."""
    values = rng.standard_normal((n, k)).astype(np.float32)
    blocks = np.asarray(gguf.quants.quantize(values, QTYPES[encoding]))
    dense = testing.dequantize(blocks, encoding).reshape(n, k).astype(np.float64)
    return QuantizedWeight(backend.from_numpy(blocks), (n, k), encoding), dense


def shifted_copy(backend: HipBackend, blocks: DeviceTensor) -> DeviceTensor:
    """The bytes of `blocks` in a new tensor whose address is 2 mod 16."""
    host = blocks.to_numpy()
    flat = np.zeros(host.size + 2, np.uint8)
    flat[2:] = host.reshape(-1)
    view = backend.from_numpy(flat)[2:].reshape(host.shape)
    assert view.ptr % 16 == 2 and view.is_contiguous
    return view


def expected(x: np.ndarray, dense: np.ndarray) -> testing.Reference:
    return testing.linear(x, dense)


@SETTINGS
@given(
    encoding=st.sampled_from(sorted(QTYPES)),
    dtype=st.sampled_from(TYPES),
    n=st.integers(1, 40),
    blocks=st.sampled_from([1, 3, 8, 9, 16, 24]),  # K = 32 · blocks: 8, 16, 24 take 16-byte copies
    rows=st.sampled_from([1, 2, 4, 5, 8, 9, 17]),  # GEMV tiles 1, 4, 16; dequantize + GEMM
    layout=st.sampled_from(["contiguous", "strided", "unaligned", "batched"]),
    tpr=st.sampled_from([32, 64, 128, 256]),
    slices=st.sampled_from([None, 1, 2, 4, 8]),
    stored=st.sampled_from(["gguf", "shifted", "split"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_matches_the_reference(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, encoding: str, dtype: str, n: int,
    blocks: int, rows: int, layout: str, tpr: int, slices: int | None, stored: str, seed: int,
) -> None:  # fmt: skip
    monkeypatch.setattr(quantized_matmul, "THREADS_PER_ROW", ((1 << 62, tpr),))
    monkeypatch.setattr(quantized_matmul, "SPLIT_SLICES", slices)
    backend._plans = None  # plans keep the kernel choice they were made with
    rng = np.random.default_rng(seed)
    k = 32 * blocks
    weight, dense = quantized(backend, rng, n, k, encoding)
    if stored == "shifted":  # the same blocks 2 bytes past a 16-byte boundary
        weight = QuantizedWeight(shifted_copy(backend, weight.blocks), (n, k), encoding)
    elif stored == "split" and k % 256 == 0:
        weight = backend.split_quantized(weight)
    if layout == "batched":
        x = testing.random(rng, (rows, 1, k), dtype)  # [B, 1, K]: a decode step's hidden states
        device_x = backend.from_numpy(x)
    elif layout == "strided":
        wide = testing.random(rng, (rows, k + 32), dtype)
        x, device_x = wide[:, 16 : 16 + k], backend.from_numpy(wide)[:, 16 : 16 + k]
    elif layout == "unaligned":
        flat = testing.random(rng, (rows * k + 1,), dtype)
        x = flat[1:].reshape(rows, k)
        device_x = backend.from_numpy(flat)[1:].reshape(rows, k)
    else:
        x = testing.random(rng, (rows, k), dtype)
        device_x = backend.from_numpy(x)
    got = backend.quantized_linear(device_x, weight)
    assert got.shape == (*x.shape[:-1], n) and got.dtype == x.dtype
    testing.assert_close(got.to_numpy(), expected(x, dense), dtype)


@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_many_rows_take_dequantize_and_gemm(backend: HipBackend, encoding: str) -> None:
    """A prefill's rows (more than GEMV_MAX_ROWS): the weight is expanded and BLAS multiplies;
    out= is written in place."""
    rng = np.random.default_rng(3)
    weight, dense = quantized(backend, rng, 24, 256, encoding)
    x = testing.random(rng, (2, quantized_matmul.GEMV_MAX_ROWS, 256), "f32")
    out = backend.empty((2, quantized_matmul.GEMV_MAX_ROWS, 24), "float32")
    got = backend.quantized_linear(backend.from_numpy(x), weight, out=out)
    assert got is out
    testing.assert_close(out.to_numpy(), expected(x, dense), "f32")


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("encoding", sorted(QTYPES))
@pytest.mark.parametrize(("k", "split"), [(96, False), (512, False), (512, True)])
def test_dequantize_is_exact(
    backend: HipBackend, encoding: str, dtype: str, k: int, split: bool
) -> None:  # fmt: skip
    rng = np.random.default_rng(5)
    weight, _ = quantized(backend, rng, 5, k, encoding)
    blocks = weight.blocks.to_numpy()
    if split:
        weight = backend.split_quantized(weight)
    got = backend.dequantize(weight, testing.DTYPES[dtype]).to_numpy()
    testing.assert_bits_equal(got, testing.dequantize(blocks, encoding, dtype).reshape(5, k))


def split_rows(blocks: np.ndarray, encoding: str) -> np.ndarray:
    """The split layout of GGUF blocks [n, k / 32 * block bytes], by numpy: each row's scales,
    then its quants."""
    block_bytes = 34 if encoding == "q8_0" else 18
    b = blocks.reshape(blocks.shape[0], -1, block_bytes)
    scales, quants = b[:, :, :2], b[:, :, 2:]
    return np.concatenate([scales.reshape(len(b), -1), quants.reshape(len(b), -1)], axis=1)


@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_split_kernels_at_every_tile_and_team_count(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    """The split GEMV at rows 1, 3, 5 and 8 (tiles 1, 4, 16), 1, 2, 4 and 8 teams a row, weights
    whose rows do not fill a block (N 1 and 9) and rows long enough that every lane loops
    (K 2304: 144 Q8_0 / 72 Q4_0 chunks), against the float64 reference."""
    rng = np.random.default_rng(19)
    for n, k in ((1, 256), (9, 2304)):
        gguf_weight, dense = quantized(backend, rng, n, k, encoding)
        weight = backend.split_quantized(gguf_weight)
        for slices in (1, 2, 4, 8):
            monkeypatch.setattr(quantized_matmul, "SPLIT_SLICES", slices)
            backend._plans = None
            for rows in (1, 3, 5, 8):
                x = testing.random(rng, (rows, k), "f32")
                got = backend.quantized_linear(backend.from_numpy(x), weight).to_numpy()
                testing.assert_close(got, expected(x, dense), "f32")


def test_bad_knobs_and_split_arguments_raise(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(23)
    weight, _ = quantized(backend, rng, 4, 256, "q8_0")
    split = backend.split_quantized(weight)
    x = backend.from_numpy(testing.random(rng, (1, 256), "f32"))
    backend._plans = None
    monkeypatch.setattr(quantized_matmul, "SPLIT_SLICES", 3)
    with pytest.raises(ValueError, match="SPLIT_SLICES"):
        backend.quantized_linear(x, split)
    monkeypatch.setattr(quantized_matmul, "SPLIT_SLICES", None)
    monkeypatch.setattr(quantized_matmul, "GEMV_MAX_ROWS", 17)
    with pytest.raises(ValueError, match="GEMV_MAX_ROWS"):
        backend.quantized_linear(x, split)
    out = backend.empty(weight.blocks.shape, "uint8")
    floats = backend.empty(weight.blocks.shape, "float32")
    for args, error, message in [
        (("q5_0", weight.blocks, out), ValueError, "encoding"),
        (("q8_0", weight.blocks.to_numpy(), out), TypeError, "DeviceTensor"),
        (("q8_0", weight.blocks, floats), ValueError, "uint8"),
        (("q4_0", weight.blocks, out), ValueError, "whole 18-byte blocks"),
        (("q8_0", weight.blocks, out[:2]), ValueError, "16-byte aligned"),
    ]:
        with pytest.raises(error, match=message):
            split_rows_into(backend.kernels, *args, stream=backend.stream)


@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_split_quantized_rearranges_the_bytes(backend: HipBackend, encoding: str) -> None:
    rng = np.random.default_rng(11)
    weight, dense = quantized(backend, rng, 7, 768, encoding)
    split = backend.split_quantized(weight)
    assert (split.layout, split.shape, split.encoding) == ("split", (7, 768), encoding)
    assert split.blocks.ptr != weight.blocks.ptr and split.nbytes == weight.nbytes
    np.testing.assert_array_equal(
        split.blocks.to_numpy(), split_rows(weight.blocks.to_numpy(), encoding)
    )
    assert backend.split_quantized(split) is split
    x = testing.random(rng, (1, 768), "f32")
    got = backend.quantized_linear(backend.from_numpy(x), split).to_numpy()
    testing.assert_close(got, expected(x, dense), "f32")


def test_repeated_calls_use_the_plan(backend: HipBackend) -> None:
    """The planned path (second call of the same layouts) gives the same result, into out= too,
    for both layouts of the weight."""
    rng = np.random.default_rng(7)
    gguf_weight, dense = quantized(backend, rng, 33, 256, "q8_0")
    host_x = testing.random(rng, (3, 256), "bf16")
    x = backend.from_numpy(host_x)
    for weight in (gguf_weight, backend.split_quantized(gguf_weight)):
        first = backend.quantized_linear(x, weight).to_numpy()
        testing.assert_close(first, expected(host_x, dense), "bf16")  # (a plan keyed by layout)
        out = backend.empty((3, 33), "bfloat16")
        for _ in range(2):
            backend.quantized_linear(x, weight, out=out)
            np.testing.assert_array_equal(out.to_numpy().view(np.uint16), first.view(np.uint16))


def test_bad_arguments_raise_before_launch(backend: HipBackend) -> None:
    rng = np.random.default_rng(9)
    weight, _ = quantized(backend, rng, 8, 64, "q4_0")
    x = backend.from_numpy(testing.random(rng, (2, 64), "f32"))
    cases: list[tuple[Any, Any, dict[str, Any], type[Exception], str]] = [
        (x, weight.blocks, {}, TypeError, "QuantizedWeight"),
        (backend.from_numpy(testing.random(rng, (2, 96), "f32")), weight, {}, ValueError,
         r"\[\.\.\., 64\]"),
        (backend.from_numpy(np.zeros((2, 64), np.int32)), weight, {}, ValueError, "x"),
        (x, weight, {"out": backend.empty((2, 8), "bfloat16")}, ValueError, "out"),
        (x, weight, {"out": backend.empty((2, 9), "float32")}, ValueError, "out"),
    ]  # fmt: skip
    for args in cases:
        a, w, options, error, message = args
        with pytest.raises(error, match=message):
            backend.quantized_linear(a, w, **options)
    blocks = weight.blocks
    for make, message in [
        (lambda: QuantizedWeight(blocks, (8, 64), "q5_0"), "encoding"),
        (lambda: QuantizedWeight(blocks, (8, 65), "q4_0"), "multiple of 32"),
        (lambda: QuantizedWeight(blocks, (8, 96), "q4_0"), "expected uint8"),
        (lambda: QuantizedWeight(blocks, (8, 64), "q8_0"), "expected uint8"),
        (lambda: QuantizedWeight(blocks.to_numpy(), (8, 64), "q4_0"), "DeviceTensor"),  # type: ignore[arg-type]
        (lambda: QuantizedWeight(blocks, (8, 64), "q4_0", "rows"), "layout"),
        (lambda: QuantizedWeight(blocks, (8, 64), "q4_0", "split"), "multiple of 256"),
        (lambda: backend.split_quantized(weight), "multiple of 256"),
        (lambda: backend.split_quantized(blocks), "QuantizedWeight"),  # type: ignore[arg-type]
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            make()
    wide, _ = quantized(backend, rng, 2, 256, "q8_0")
    with pytest.raises(ValueError, match="16-byte aligned"):
        QuantizedWeight(shifted_copy(backend, wide.blocks), (2, 256), "q8_0", "split")


@pytest.mark.gpu
@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_llama_shapes(backend: HipBackend, platform: str, encoding: str) -> None:
    """A 1B/8B Llama's down projection (K = 14336) and a 4096-wide layer at rows 1 and 16, bf16,
    in both layouts."""
    if platform == "cpu":
        pytest.skip("a GPU-sized shape")
    rng = np.random.default_rng(13)
    for n, k in ((4096, 4096), (1024, 14336)):
        weight, dense = quantized(backend, rng, n, k, encoding)
        for stored in (weight, backend.split_quantized(weight)):
            for rows in (1, 4, 8, 16):  # the GEMV's tiles 1, 4 and 16; then dequantize + GEMM
                x = testing.random(rng, (rows, k), "bf16")
                got = backend.quantized_linear(backend.from_numpy(x), stored).to_numpy()
                testing.assert_close(got, expected(x, dense), "bf16")


def test_the_llama_loader_splits_rows_of_a_multiple_of_256(backend: HipBackend) -> None:
    """`llama_weights.prepare` keeps a kept-quantized weight whose rows are a multiple of 256
    long in the split layout (the decode GEMV's) and the others in GGUF's, each holding the
    checkpoint's values."""
    config = LlamaConfig(
        vocab_size=32, hidden_size=256, intermediate_size=96, layers=1, heads=2, kv_heads=1,
        head_dim=128, rms_norm_eps=1e-5, rope_theta=1e4, max_positions=16,
        tie_word_embeddings=True, rope={"rope_type": "default"},
    )  # fmt: skip
    rng = np.random.default_rng(17)
    tensors, quantized_records, dense = {}, {}, {}
    for name, shape in llama_weights.checkpoint_names(config, "hf").items():
        if len(shape) == 2 and "embed" not in name:
            weight, dense[name] = quantized(backend, rng, *shape, "q8_0")  # type: ignore[misc]
            tensors[name] = weight.blocks
            quantized_records[name] = ("q8_0", shape)
        else:
            tensors[name] = backend.from_numpy(rng.standard_normal(shape).astype(np.float32))
    weights = llama_weights.prepare(backend, tensors, config, "float32", "hf", quantized_records)
    layer = weights.layers[0]
    assert (layer.q.layout, layer.gate.layout, layer.down.layout) == ("split", "split", "gguf")
    for field, name in (("q", "self_attn.q_proj"), ("down", "mlp.down_proj")):
        got = backend.dequantize(getattr(layer, field)).to_numpy()
        np.testing.assert_array_equal(got, dense[f"model.layers.0.{name}.weight"])
