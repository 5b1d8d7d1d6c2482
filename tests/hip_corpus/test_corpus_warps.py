"""Warp-level and cooperative corpus kernels, unmodified, on the cpu platform (real warps of
warpSize lanes) and, marked gpu, on nvidia, checked against numpy: a block sum templated on
the warp size, ballots with population counts, __shfl_up / __shfl_xor scans, cooperative
groups' tiles, a grid-wide sync in a cooperative launch, and the explicitly rounded arithmetic
intrinsics."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hip_corpus_io import download, upload  # registered by conftest.py

from hip_core import Device, HipError, Module, Program, hip_api

Load = Callable[..., Module]


def rng() -> np.random.Generator:
    return np.random.default_rng(23)


def warp_size(device: Device) -> int:
    return device.attribute("WarpSize")


def need_warp_of(device: Device, lanes: int) -> None:
    """Skip, saying why, where the device's warps are narrower than a sample is written for
    (the cpu platform under HIP_FFI_CPU_WARP_SIZE=1: a tile of 16 lanes cannot exist there,
    as on any GPU whose warp is narrower than the tile)."""
    if (warp := warp_size(device)) < lanes:
        pytest.skip(f"the sample needs warps of >= {lanes} lanes; this device's are {warp}")


def test_block_sum_templated_on_the_devices_warp_size(device: Device, load: Load) -> None:
    need_warp_of(device, 32)  # instantiated for warps of 32 and 64, as libraries write it
    warp = warp_size(device)
    x = rng().standard_normal(10_000, dtype=np.float32)
    blocks, threads = 6, 256
    sums = device.allocate(4 * blocks)
    kernel = load("warp_reduce_sized.hip").get_kernel(f"warp_sum<{warp}>")
    kernel.launch(blocks, threads, upload(device, x), sums, x.size)
    got = download(device, sums, np.float32, blocks)
    stride = blocks * threads
    expected = [
        sum(x[b * threads + t :: stride].astype(np.float64).sum() for t in range(threads))
        for b in range(blocks)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_ballot_popcount_any_all_and_activemask(device: Device, load: Load) -> None:
    warp = warp_size(device)
    n, threads = 1000, 128
    blocks = -(-n // threads)
    warps = blocks * threads // warp
    x = rng().standard_normal(blocks * threads).astype(np.float32)
    x[: 2 * warp] = 1.0  # warp 0 all positive, warp 1 too
    x[2 * warp : 3 * warp] = -1.0  # warp 2 none
    gx = upload(device, x)
    positives = upload(device, np.zeros(1, np.uint32))
    any_flags, all_flags = device.allocate(4 * warps), device.allocate(4 * warps)
    masks = device.allocate(8 * warps)
    load("ballot_histogram.hip").get_kernel("vote_counts").launch(
        blocks, threads, gx, n, positives, any_flags, all_flags, masks
    )
    valid = np.arange(x.size) < n
    predicate = (x > 0) & valid
    assert download(device, positives, np.uint32, 1)[0] == predicate.sum()
    per_warp = predicate.reshape(warps, warp)
    np.testing.assert_array_equal(download(device, any_flags, np.int32, warps), per_warp.any(1))
    np.testing.assert_array_equal(download(device, all_flags, np.int32, warps), per_warp.all(1))
    full = (1 << warp) - 1
    np.testing.assert_array_equal(download(device, masks, np.uint64, warps), full)


def test_shfl_up_scan_and_shfl_xor_butterfly(device: Device, load: Load) -> None:
    warp = warp_size(device)
    n, threads = 777, 192
    values = rng().integers(-100, 100, n, dtype=np.int32)
    prefix, totals = device.allocate(4 * n), device.allocate(4 * n)
    load("warp_scan.hip").get_kernel("warp_scan").launch(
        -(-n // threads), threads, upload(device, values), prefix, totals, n
    )
    padded = np.zeros(-(-n // warp) * warp, np.int64)
    padded[:n] = values
    lanes = padded.reshape(-1, warp)
    np.testing.assert_array_equal(
        download(device, prefix, np.int32, n), np.cumsum(lanes, axis=1).reshape(-1)[:n]
    )
    np.testing.assert_array_equal(
        download(device, totals, np.int32, n), np.repeat(lanes.sum(1), warp)[:n]
    )


def test_tiled_partition_reduce_and_tile_votes(device: Device, load: Load) -> None:
    need_warp_of(device, 16)  # tiled_partition<16>
    n, threads = 1000, 256
    blocks = -(-n // threads)
    x = rng().standard_normal(blocks * threads).astype(np.float32)
    x[n:] = 0.0
    tiles, block_out = device.allocate(4 * blocks * threads // 16), device.allocate(4 * blocks)
    info = device.allocate(4 * n)
    load("tiled_partition.hip").get_kernel("tile_sums").launch(
        blocks, threads, upload(device, x[:n]), tiles, block_out, info, n
    )
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(
        download(device, tiles, np.float32, blocks * threads // 16),
        x64.reshape(-1, 16).sum(1),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        download(device, block_out, np.float32, blocks),
        x64.reshape(blocks, -1).sum(1),
        rtol=1e-5,
        atol=1e-4,
    )
    positive = (x > 0).reshape(-1, 4)
    bits = (positive * (1 << np.arange(4))).sum(1)
    expected = bits | (positive.any(1) << 4) | (positive.all(1) << 5)
    expected = np.repeat(expected, 4) | ((np.arange(x.size) % 4) << 6)
    np.testing.assert_array_equal(download(device, info, np.uint32, n), expected[:n])


def test_grid_sync_in_a_cooperative_launch(device: Device, load: Load) -> None:
    kernel = load("grid_sync.hip").get_kernel("two_phase_sum")
    threads = 256
    most = kernel.max_active_blocks(threads) * device.attribute("MultiprocessorCount")
    blocks = max(1, min(8, most))
    x = rng().standard_normal(50_000, dtype=np.float32)
    partials, out = device.allocate(4 * blocks), device.allocate(4)
    kernel.launch_cooperative(blocks, threads, upload(device, x), partials, out, x.size)
    got = download(device, out, np.float32, 1)[0]
    np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    with pytest.raises(HipError, match="CooperativeLaunchTooLarge"):
        kernel.launch_cooperative(most + 1, threads, upload(device, x), partials, out, x.size)


def test_grid_sync_without_a_cooperative_launch_fails_on_cpu(device: Device, load: Load) -> None:
    if hip_api().platform != "cpu":
        pytest.skip("undefined behaviour on a GPU")
    kernel = load("grid_sync.hip").get_kernel("two_phase_sum")
    x = np.ones(64, np.float32)
    kernel.launch(2, 32, upload(device, x), device.allocate(8), device.allocate(4), x.size)
    with pytest.raises(HipError, match="cooperative launch"):
        device.synchronize()


def _rounded(kind: Any, approx: float, side: Callable[[Fraction], int], mode: str) -> float:
    """The `kind` (np.float32 / np.float64) value that rounding mode `mode` gives for the real
    number x near `approx` that `side(c)` compares with: sign(c - x), exactly."""
    c = kind(approx)
    up, down = kind(np.inf), kind(-np.inf)
    while side(Fraction(float(c))) < 0:  # RU: the smallest value >= x
        c = np.nextafter(c, up)
    while side(Fraction(float(np.nextafter(c, down)))) >= 0:
        c = np.nextafter(c, down)
    high = c
    low = high if side(Fraction(float(high))) == 0 else np.nextafter(high, down)
    if mode == "ru":
        return float(high)
    if mode == "rd":
        return float(low)
    if mode == "rz":
        return float(low if side(Fraction(0)) < 0 else high)
    middle = (Fraction(float(low)) + Fraction(float(high))) / 2  # rn: ties to even
    where = side(middle)
    if where == 0:
        return float(low if int(np.array(low).view(f"u{low.itemsize}")) % 2 == 0 else high)
    return float(low if where > 0 else high)


def _of(exact: Fraction) -> Callable[[Fraction], int]:
    return lambda c: (c > exact) - (c < exact)


def _root_of(x: Fraction) -> Callable[[Fraction], int]:
    return lambda c: 1 if c > 0 and c * c > x else (-1 if c < 0 or c * c < x else 0)


def _expected(kind: Any, cases: list[tuple[Callable[[float, float], Any], str]], a: Any, b: Any):
    rows = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        fx, fy = Fraction(x), Fraction(y)
        row = []
        for make, mode in cases:
            side, approx = make(fx, fy)
            row.append(_rounded(kind, approx, side, mode))
        rows.append(row)
    return np.array(rows)


def _sum(x: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(x + y), float(x + y)


def _difference(x: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(x - y), float(x - y)


def _product(x: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(x * y), float(x * y)


def _quotient(x: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(x / y), float(x / y)


def _root(x: Fraction, _: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _root_of(abs(x)), float(abs(x)) ** 0.5


def _reciprocal(_: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(1 / y), float(1 / y)


def _fma(x: Fraction, y: Fraction) -> tuple[Callable[[Fraction], int], float]:
    return _of(x * y + 1), float(x * y + 1)


F32_CASES = [
    *((op, mode) for op in (_sum, _product, _quotient, _root) for mode in ("rn", "rz", "ru", "rd")),
    (_difference, "rz"), (_reciprocal, "ru"), (_fma, "rd"),
]  # fmt: skip
F64_CASES = [(_sum, "rn"), (_difference, "rn"), (_product, "rn"), (_quotient, "rn"), (_fma, "rn"),
             (_root, "rn")]  # fmt: skip


def test_rounding_mode_intrinsics_in_float(device: Device, load: Load) -> None:
    n = 200
    generator = rng()
    a = (generator.standard_normal(n) * 10).astype(np.float32)
    b = (generator.standard_normal(n) * 10).astype(np.float32)
    out = device.allocate(4 * 20 * n)
    load("rounding.hip").get_kernel("rounded_f32").launch(
        -(-n // 64), 64, upload(device, a), upload(device, b), out, n
    )
    got = download(device, out, np.float32, (n, 20))
    expected = _expected(np.float32, F32_CASES, a, b)
    np.testing.assert_array_equal(got[:, :19], expected.astype(np.float32))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    norms = np.sqrt(a64**2 + b64**2 + 4.0) / np.hypot(a64, b64)
    np.testing.assert_allclose(got[:, 19], norms, rtol=1e-5)


def test_rounding_mode_intrinsics_in_double(device: Device, load: Load) -> None:
    n = 100
    generator = rng()
    a = generator.standard_normal(n) * 10
    b = generator.standard_normal(n) * 10
    out = device.allocate(8 * 8 * n)
    load("rounding.hip").get_kernel("rounded_f64").launch(
        -(-n // 64), 64, upload(device, a), upload(device, b), out, n
    )
    got = download(device, out, np.float64, (n, 8))
    np.testing.assert_array_equal(got[:, :6], _expected(np.float64, F64_CASES, a, b))
    np.testing.assert_array_equal(got[:, 6], a)  # __hiloint2double of its two halves
    bessel = np.i0(b.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(got[:, 7], bessel, rtol=2e-6)


def test_a_64_lane_wavefront_on_cpu(
    device: Device, corpus_programs: Callable[..., Program]
) -> None:
    """-mwavefrontsize64 gives a program 64-lane warps on the cpu platform (as on AMD)."""
    if hip_api().platform != "cpu":
        pytest.skip("the cpu platform's warp-size option")
    module = corpus_programs("warp_reduce_sized.hip", options=["-mwavefrontsize64"]).load(device)
    x = rng().standard_normal(4096, dtype=np.float32)
    sums = device.allocate(4 * 2)
    module.get_kernel("warp_sum<64>").launch(2, 256, upload(device, x), sums, x.size)
    got = download(device, sums, np.float32, 2).sum()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    votes = corpus_programs("ballot_histogram.hip", options=["-mwavefrontsize64"]).load(device)
    masks = device.allocate(8 * 2)
    flags = device.allocate(4 * 2)
    count = upload(device, np.zeros(1, np.uint32))
    votes.get_kernel("vote_counts").launch(
        1, 128, upload(device, x), 128, count, flags, flags, masks
    )
    np.testing.assert_array_equal(download(device, masks, np.uint64, 2), 2**64 - 1)
    assert download(device, count, np.uint32, 1)[0] == (x[:128] > 0).sum()
