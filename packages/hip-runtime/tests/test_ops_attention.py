"""scaled_dot_product_attention against hip_runtime.testing's float64 reference, under
hypothesis: random batch, heads and grouped-query ratios, query and key lengths (decode-like
Sq < Skv too), head sizes across the three tile shapes, causal, boolean and additive masks that
broadcast, fully masked rows, and q/k/v read through [B, S, H, D] views without a copy.

f32 at head sizes up to 64 runs the register-tiled kernel (kernels/attention_tiled.h), checked over
several 64-query and 64-key tiles with partial last ones, unaligned rows and whole masked rows and
tiles; the scalar kernel it replaced stays reachable (ops.attention._SCALAR_D64) and is checked too.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
The matrix-core paths (f16/bf16 at D 32, 64 and 128) are checked on the GPU with large shapes
(marked gpu), and everywhere in a host emulation built with g++ (test_ops_attention_emulation.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing

SETTINGS = settings(
    max_examples=25, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
HEAD_SIZES = [1, 8, 20, 32, 33, 64, 65, 128, 160, 256]


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def bshd(backend: HipBackend, array: np.ndarray) -> Any:
    """A [B, H, S, D] tensor stored as [B, S, H, D] (the projections' layout): a view."""
    stored = np.ascontiguousarray(array.transpose(0, 2, 1, 3))
    return backend.from_numpy(stored).permute(0, 2, 1, 3)


@SETTINGS
@given(data=st.data())
def test_attention_matches_the_reference(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    batch, kv_heads = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    heads = kv_heads * data.draw(st.integers(1, 3))
    sq, skv = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 70))
    d = data.draw(st.sampled_from(HEAD_SIZES))
    causal = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    q = testing.random(rng, (batch, heads, sq, d), dtype)
    k = testing.random(rng, (batch, kv_heads, skv, d), dtype)
    v = testing.random(rng, (batch, kv_heads, skv, d), dtype)
    mask_kind = data.draw(st.sampled_from(["none", "bool", "additive"]))
    mask = None
    if mask_kind != "none":  # key padding per batch, broadcast over heads and queries
        shape = data.draw(st.sampled_from([(batch, 1, 1, skv), (1, heads, sq, skv), (sq, skv)]))
        mask = rng.random(shape) > 0.3
        if mask_kind == "additive":
            mask = np.where(mask, 0.0, -np.inf).astype(q.dtype)
    views = data.draw(st.booleans())
    upload = (lambda a: bshd(backend, a)) if views else backend.from_numpy
    got = backend.scaled_dot_product_attention(
        upload(q), upload(k), upload(v), causal=causal,
        mask=None if mask is None else backend.from_numpy(mask),
    )  # fmt: skip
    expected = testing.attention(q, k, v, causal=causal, mask=mask)
    testing.assert_close(got.to_numpy(), expected, dtype)


def test_rows_that_see_no_key_are_zeros_not_nan(backend: HipBackend) -> None:
    rng = np.random.default_rng(1)
    q, k, v = (testing.random(rng, (1, 2, 5, 16), "f32") for _ in range(3))
    mask = np.ones((5, 5), bool)
    mask[2] = False  # query 2 sees nothing
    got = backend.scaled_dot_product_attention(
        *map(backend.from_numpy, (q, k, v)), mask=backend.from_numpy(mask)
    ).to_numpy()
    assert np.all(got[:, :, 2] == 0) and np.isfinite(got).all()
    # More queries than keys, causal: the first queries see no key at all.
    short = backend.from_numpy(k[:, :, :2])
    got = backend.scaled_dot_product_attention(
        backend.from_numpy(q), short, short, causal=True
    ).to_numpy()
    assert np.all(got[:, :, :3] == 0)
    testing.assert_close(got, testing.attention(q, k[:, :, :2], k[:, :, :2], causal=True), "f32")


def test_bad_shapes_dtypes_and_layouts_are_refused_before_launch(backend: HipBackend) -> None:
    q = backend.zeros((1, 4, 3, 8))
    k = backend.zeros((1, 2, 5, 8))
    sdpa = backend.scaled_dot_product_attention
    with pytest.raises(ValueError, match="multiple"):
        sdpa(q, backend.zeros((1, 3, 5, 8)), backend.zeros((1, 3, 5, 8)))
    with pytest.raises(ValueError, match="dtypes"):
        sdpa(q, k, backend.zeros((1, 2, 5, 8), "float16"))
    with pytest.raises(ValueError, match="up to 256"):
        sdpa(*(backend.zeros((1, 1, 2, 300)),) * 3)
    with pytest.raises(ValueError, match="contiguous"):
        sdpa(backend.zeros((1, 4, 8, 3)).mT, k, k)
    with pytest.raises(ValueError, match="broadcast"):
        sdpa(q, k, k, mask=backend.zeros((4, 4), "bool"))
    with pytest.raises(ValueError, match="bool or float32"):
        sdpa(q, k, k, mask=backend.zeros((3, 5), "int32"))
    with pytest.raises(ValueError, match=r"\[B, Hq, Sq, D\]"):
        sdpa(backend.zeros((4, 3, 8)), k, k)


class KernelNames:
    """Records the entry points the backend launches (which path a call took)."""

    def __init__(self, backend: HipBackend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        kernel = backend._kernel

        def spy(source: str, name: str) -> Any:
            self.names.append(name)
            return kernel(source, name)

        monkeypatch.setattr(backend, "_kernel", spy)


def attention_case(
    backend: HipBackend, rng: np.random.Generator, dtype: str, shape: tuple[int, ...],
    *, causal: bool, mask_kind: str, views: bool,
) -> None:  # fmt: skip
    """One call against the float64 reference: shape (B, Hq, Hkv, Sq, Skv, D)."""
    batch, heads, kv_heads, sq, skv, d = shape
    q = testing.random(rng, (batch, heads, sq, d), dtype)
    k = testing.random(rng, (batch, kv_heads, skv, d), dtype)
    v = testing.random(rng, (batch, kv_heads, skv, d), dtype)
    mask = None
    if mask_kind == "padding":  # per-sequence key padding, broadcast over heads and queries
        lengths = rng.integers(1, skv + 1, batch)
        mask = np.arange(skv)[None, None, None, :] < lengths[:, None, None, None]
    elif mask_kind == "additive":  # a bias per (query, key), some keys hidden, one row all -inf
        mask = testing.random(rng, (sq, skv), dtype)
        mask[rng.random((sq, skv)) < 0.2] = -np.inf
        mask[sq // 2] = -np.inf
    upload = (lambda a: bshd(backend, a)) if views else backend.from_numpy
    got = backend.scaled_dot_product_attention(
        upload(q), upload(k), upload(v), causal=causal,
        mask=None if mask is None else backend.from_numpy(mask),
    )  # fmt: skip
    expected = testing.attention(q, k, v, causal=causal, mask=mask)
    testing.assert_close(got.to_numpy(), expected, dtype)


@settings(SETTINGS, max_examples=12)
@given(data=st.data())
def test_16bit_head_sizes_32_64_and_128_take_the_128_query_launch(
    backend: HipBackend, data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """f16/bf16 with D 32, 64 or 128 and 16-byte rows go to attention_mma_d<D> (matrix cores on
    NVIDIA sm_80+, the portable kernel 128 queries per block elsewhere); rows off 16 bytes go
    to the portable entry point. Several 128-query blocks, GQA, causal with an offset, masks."""
    dtype = data.draw(st.sampled_from(["f16", "bf16"]))
    d = data.draw(st.sampled_from([32, 64, 128]))
    kv_heads = data.draw(st.integers(1, 2))
    heads = kv_heads * data.draw(st.integers(1, 2))
    shape = (1, heads, kv_heads, data.draw(st.integers(1, 300)), data.draw(st.integers(1, 300)), d)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    spy = KernelNames(backend, monkeypatch)
    attention_case(
        backend, rng, dtype, shape, causal=data.draw(st.booleans()),
        mask_kind=data.draw(st.sampled_from(["none", "padding", "additive"])),
        views=data.draw(st.booleans()),
    )  # fmt: skip
    assert spy.names == [f"attention_mma_d{d}_{dtype}"]


def test_rows_off_16_bytes_take_the_portable_kernel(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    stored = testing.random(rng, (1, 2, 70, 65), "bf16")
    q = stored[..., 1:]  # rows start 2 bytes past 16-byte boundaries
    spy = KernelNames(backend, monkeypatch)
    x = backend.from_numpy(stored)[..., 1:]
    got = backend.scaled_dot_product_attention(x, x, x, causal=True).to_numpy()
    assert spy.names == ["attention_d64_bf16"]
    testing.assert_close(got, testing.attention(q, q, q, causal=True), "bf16")


# The register-tiled kernel (kernels/attention_tiled.h: 64 queries x 64 keys per block) over
# several query and key tiles with partial last ones, each case as (B, Hq, Hkv, Sq, Skv, D),
# causal, mask kind, [B, S, H, D] views: d up to 32 takes attention_d32, up to 64 attention_d64.
TILED = {
    "encoder-padding": ((3, 4, 4, 130, 130, 32), False, "padding", True),
    "gqa-causal-offset": ((1, 6, 2, 70, 200, 64), True, "none", False),
    "causal-more-queries": ((2, 2, 1, 150, 67, 32), True, "padding", True),
    "additive-rows-all-masked": ((1, 3, 3, 129, 65, 64), False, "additive", False),
    "additive-causal-odd-d": ((2, 2, 2, 66, 131, 20), True, "additive", True),
    "odd-d-not-4-aligned": ((1, 2, 1, 100, 90, 47), False, "padding", False),
}


@pytest.mark.parametrize("case", sorted(TILED))
def test_f32_head_sizes_up_to_64_take_the_register_tiled_kernel(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    shape, causal, mask_kind, views = TILED[case]
    spy = KernelNames(backend, monkeypatch)
    rng = np.random.default_rng(len(case))
    attention_case(backend, rng, "f32", shape, causal=causal, mask_kind=mask_kind, views=views)
    assert spy.names == [f"attention_d{32 if shape[-1] <= 32 else 64}_f32"]


def test_f32_rows_off_16_bytes_and_full_masks_in_the_tiled_kernel(backend: HipBackend) -> None:
    """Rows that start 4 bytes past 16-byte boundaries (the element-at-a-time loads and
    stores), a boolean mask over every (batch, head, query, key) with whole rows and whole key
    tiles masked, and an output written through strides."""
    rng = np.random.default_rng(3)
    stored = testing.random(rng, (2, 3, 140, 33), "f32")
    x = stored[..., 1:]  # d = 32, row stride 33
    mask = rng.random((2, 3, 140, 140)) > 0.5
    mask[:, :, 7] = False  # query 7 sees nothing
    mask[:, 1, :, 64:128] = False  # head 1: the second key tile is hidden from every query
    out = backend.zeros((2, 140, 3, 32)).permute(0, 2, 1, 3)
    tensor = backend.from_numpy(stored)[..., 1:]
    backend.scaled_dot_product_attention(
        tensor, tensor, tensor, mask=backend.from_numpy(mask), out=out
    )
    got = out.to_numpy()
    assert np.all(got[:, :, 7] == 0)
    testing.assert_close(got, testing.attention(x, x, x, mask=mask), "f32")


def test_the_scalar_kernel_stays_reachable_for_comparisons(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ops.attention._SCALAR_D64 (bench_attention --scalar) sends d <= 64 to the kernel the
    register-tiled one replaced; both agree with the reference."""
    from hip_runtime.ops import attention as op

    monkeypatch.setattr(op, "_SCALAR_D64", True)
    spy = KernelNames(backend, monkeypatch)
    shape = (2, 2, 1, 70, 90, 32)
    attention_case(
        backend, np.random.default_rng(4), "f32", shape, causal=True, mask_kind="padding",
        views=False,
    )  # fmt: skip
    assert spy.names == ["attention_scalar_d64_f32"]


# f32 at the encoder's and a longer shape on the GPU (the H200 run): (B, Hq, Hkv, Sq, Skv, D).
LARGE_F32 = {
    "encoder": ((16, 12, 12, 128, 128), False, "padding", True),
    "long-causal-gqa": ((1, 8, 2, 700, 901), True, "none", False),
    "additive-512": ((2, 4, 4, 512, 512), False, "additive", True),
}


@pytest.mark.parametrize("platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True)
@pytest.mark.parametrize("case", sorted(LARGE_F32))
@pytest.mark.parametrize("d", [32, 64])
def test_large_f32_attention_on_the_gpu(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, d: int, case: str
) -> None:
    shape, causal, mask_kind, views = LARGE_F32[case]
    spy = KernelNames(backend, monkeypatch)
    rng = np.random.default_rng(len(case) * d)
    attention_case(
        backend, rng, "f32", (*shape, d), causal=causal, mask_kind=mask_kind, views=views
    )
    assert spy.names == [f"attention_d{d}_f32"]


# Large shapes for the matrix-core path (the H200 run): (B, Hq, Hkv, Sq, Skv, D) per case.
LARGE = {
    "causal-gqa": ((2, 8, 2, 1024, 1024), True, "none", False),
    "causal-offset": ((1, 4, 4, 200, 1500), True, "none", True),
    "plain-odd-lengths": ((2, 4, 1, 700, 901), False, "none", True),
    "key-padding": ((3, 4, 2, 513, 777), False, "padding", False),
    "additive-causal": ((1, 4, 2, 300, 640), True, "additive", True),
}


@pytest.mark.parametrize("platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True)
@pytest.mark.parametrize("case", sorted(LARGE))
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_large_16bit_attention_on_the_matrix_cores(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, dtype: str, d: int, case: str
) -> None:
    shape, causal, mask_kind, views = LARGE[case]
    spy = KernelNames(backend, monkeypatch)
    rng = np.random.default_rng(len(case) * d)
    attention_case(
        backend, rng, dtype, (*shape, d), causal=causal, mask_kind=mask_kind, views=views
    )
    assert spy.names == [f"attention_mma_d{d}_{dtype}"]
