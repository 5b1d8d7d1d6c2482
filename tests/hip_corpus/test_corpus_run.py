"""Every corpus kernel, unmodified, on the cpu platform (and, marked gpu, on nvidia), checked
against numpy. What each one exercises: C++ linkage (saxpy, bitonic sort, Floyd-Warshall,
histogram, n-body, structs), a template instantiated by name expression (transpose), nested
namespaces (matmul), `__constant__` (convolution), dynamic shared memory (prefix sum, n-body),
atomics (histogram, warp reduce), vector and struct arguments by value (n-body, structs),
`uint`/`size_t` parameters, no `#include` (warp reduce, deprecated spellings)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
import pytest
from hip_corpus_io import download, upload  # registered by conftest.py

from hip_core import Device, DeviceBuffer, Module, hip_api

Load = Callable[..., Module]


def rng() -> np.random.Generator:
    return np.random.default_rng(17)


def test_saxpy_with_cxx_linkage_is_found_by_its_plain_name(device: Device, load: Load) -> None:
    x, y = rng().standard_normal((2, 5000), dtype=np.float32)
    gx, gy = upload(device, x), upload(device, y)
    load("saxpy.hip").get_kernel("saxpy").launch(8, 256, x.size, 2.5, gx, gy)
    expected = 2.5 * x.astype(np.float64) + y  # fused or not: atol covers results near 0
    np.testing.assert_allclose(
        download(device, gy, np.float32, x.size), expected, rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("tile", [16, 32])
def test_transpose_templated_on_the_tile_size(device: Device, load: Load, tile: int) -> None:
    rows, cols = 70, 45
    a = rng().standard_normal((rows, cols), dtype=np.float32)
    kernel = load("transpose.hip").get_kernel(f"matrix_transpose_kernel<{tile}>")
    assert [p.decl for p in kernel.params][2:] == ["int rows", "int cols"]
    gin, gout = upload(device, a), device.allocate(a.nbytes)
    grid = (-(-cols // tile), -(-rows // tile))
    kernel.launch(grid, (tile, 8), gout, gin, rows, cols)
    np.testing.assert_array_equal(download(device, gout, np.float32, (cols, rows)), a.T)


def test_histogram_with_shared_and_global_atomics(device: Device, load: Load) -> None:
    data = rng().integers(0, 256, 100_000, dtype=np.uint8)
    bins = upload(device, np.zeros(256, np.uint32))
    load("histogram.hip").get_kernel("histogram256").launch(
        16, 256, upload(device, data), data.size, bins
    )
    expected = np.bincount(data, minlength=256)
    np.testing.assert_array_equal(download(device, bins, np.uint32, 256), expected)


def test_prefix_sum_in_two_levels(device: Device, load: Load) -> None:
    n, threads = 3000, 128
    per_block = 2 * threads
    blocks = -(-n // per_block)
    values = rng().integers(-50, 50, n, dtype=np.int32)
    module = load("prefix_sum.hip")
    scan, add = module.get_kernel("scan_blocks"), module.get_kernel("add_block_offsets")
    out, sums, offsets = (
        device.allocate(4 * n),
        device.allocate(4 * blocks),
        device.allocate(4 * blocks),
    )
    shared = per_block * 4
    scan.launch(blocks, threads, upload(device, values), out, sums, n, shared_mem=shared)
    scan.launch(1, threads, sums, offsets, None, blocks, shared_mem=shared)
    add.launch(blocks, threads, out, offsets, n)
    expected = np.concatenate([[0], np.cumsum(values)[:-1]])
    np.testing.assert_array_equal(download(device, out, np.int32, n), expected)


def test_bitonic_sort_with_const_uint_parameters(device: Device, load: Load) -> None:
    length = 1024
    keys = rng().integers(0, 2**31, length, dtype=np.uint32)
    kernel = load("bitonic_sort.hip").get_kernel("bitonicSort")
    assert [p.storage for p in kernel.params] == ["uintptr_t", "uint32_t", "uint32_t", "uint32_t"]
    array = upload(device, keys)
    stages = length.bit_length() - 1
    for stage in range(stages):
        for pass_of_stage in range(stage + 1):
            kernel.launch(length // 2 // 128, 128, array, stage, pass_of_stage, 1)
    np.testing.assert_array_equal(download(device, array, np.uint32, length), np.sort(keys))


def test_floyd_warshall(device: Device, load: Load) -> None:
    n = 48
    weights = rng().integers(1, 100, (n, n), dtype=np.uint32)
    np.fill_diagonal(weights, 0)
    distance, path = upload(device, weights), upload(device, np.zeros((n, n), np.uint32))
    kernel = load("floyd_warshall.hip").get_kernel("floydWarshallPass")
    for k in range(n):
        kernel.launch((-(-n // 16), -(-n // 16)), (16, 16), distance, path, n, k)
    expected = weights.astype(np.int64)
    for k in range(n):
        expected = np.minimum(expected, expected[:, k : k + 1] + expected[k : k + 1, :])
    np.testing.assert_array_equal(download(device, distance, np.uint32, (n, n)), expected)


def test_tiled_matmul_in_nested_namespaces(device: Device, load: Load) -> None:
    m, n, k = 37, 29, 50
    a = rng().standard_normal((m, k), dtype=np.float32)
    b = rng().standard_normal((k, n), dtype=np.float32)
    kernel = load("matmul.hip", options=["-DTILE=16"]).get_kernel("blas::tiled::matmul")
    c = device.allocate(4 * m * n)
    kernel.launch(
        (-(-n // 16), -(-m // 16)), (16, 16), upload(device, a), upload(device, b), c, m, n, k
    )
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(
        download(device, c, np.float32, (m, n)), expected, rtol=1e-4, atol=1e-4
    )


def test_convolution_with_a_constant_mask(device: Device, load: Load) -> None:
    n, width = 1000, 9
    signal = rng().standard_normal(n, dtype=np.float32)
    mask = rng().standard_normal(width, dtype=np.float32)
    module = load("convolution.hip")
    address, size = module.get_global("mask")
    assert size == mask.nbytes
    DeviceBuffer.wrap(address, size, device).copy_from(mask.view(np.uint8))
    out = device.allocate(signal.nbytes)
    module.get_kernel("convolve1d").launch(-(-n // 128), 128, upload(device, signal), out, n)
    padded = np.pad(signal.astype(np.float64), width // 2)
    expected = np.array([padded[i : i + width] @ mask for i in range(n)])
    np.testing.assert_allclose(download(device, out, np.float32, n), expected, rtol=1e-4, atol=1e-5)


def test_nbody_step_on_float4_bodies_and_a_float3_shift(device: Device, load: Load) -> None:
    n, dt, softening2 = 200, 0.01, 0.05
    generator = rng()
    pos = generator.standard_normal((n, 4)).astype(np.float32)
    pos[:, 3] = generator.uniform(0.5, 1.5, n)
    vel = generator.standard_normal((n, 4)).astype(np.float32) * 0.1
    module = load("nbody.hip")
    gpos, gvel, gnew = upload(device, pos), upload(device, vel), device.allocate(pos.nbytes)
    module.get_kernel("nbody_step").launch(
        -(-n // 64), 64, gpos, gvel, gnew, n, dt, softening2, shared_mem=64 * 16
    )
    p = pos.astype(np.float64)
    r = p[None, :, :3] - p[:, None, :3]
    inv = (np.sum(r**2, axis=2) + softening2) ** -1.5
    acc = np.sum(r * (p[None, :, 3] * inv)[:, :, None], axis=1)
    v = vel[:, :3] + acc * dt
    np.testing.assert_allclose(
        download(device, gvel, np.float32, (n, 4))[:, :3], v, rtol=1e-3, atol=1e-4
    )
    new = download(device, gnew, np.float32, (n, 4))
    np.testing.assert_allclose(new[:, :3], p[:, :3] + v * dt, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(new[:, 3], pos[:, 3])

    shift = module.get_kernel("shift_bodies")
    shift.launch(-(-n // 64), 64, gnew, (1.0, -2.0, 0.5), n)
    shift.launch(-(-n // 64), 64, gnew, np.array([0.25, 0.25, 0.25], np.float32), n)
    shifted = download(device, gnew, np.float32, (n, 4))
    np.testing.assert_allclose(
        shifted[:, :3], new[:, :3] + [1.25, -1.75, 0.75], rtol=1e-6, atol=1e-6
    )
    for bad in [(1.0, 2.0), "xyz", (1.0, 2.0, "z")]:
        with pytest.raises(TypeError, match=r"parameter 1 \(float3 offset\)"):
            shift.launch(1, 64, gnew, bad, n)


AFFINE = np.dtype([("scale", "f4"), ("offset", "f8"), ("lo", "i4"), ("hi", "i4")], align=True)


class Window(ctypes.Structure):
    _fields_ = [("x0", ctypes.c_int), ("y0", ctypes.c_int), ("width", ctypes.c_int),
                ("height", ctypes.c_int)]  # fmt: skip


def test_structs_by_value_from_a_numpy_dtype_and_a_ctypes_structure(
    device: Device, load: Load
) -> None:
    module = load("struct_args.hip", types={"Affine": AFFINE, "img::Window": Window})
    x = rng().uniform(-10, 10, 999).astype(np.float32)
    out = device.allocate(4 * x.size)
    affine = module.get_kernel("affine_clamp")
    affine.launch(-(-x.size // 128), 128, upload(device, x), out, x.size, (3.0, 0.5, -12, 20))
    expected = np.clip(np.floor(x.astype(np.float64) * 3.0 + 0.5), -12, 20)
    np.testing.assert_array_equal(download(device, out, np.int32, x.size), expected)
    value = np.array((1.0, -0.25, 0, 5), AFFINE)[()]
    affine.launch(-(-x.size // 128), 128, upload(device, x), out, x.size, value)
    expected = np.clip(np.floor(x.astype(np.float64) - 0.25), 0, 5)
    np.testing.assert_array_equal(download(device, out, np.int32, x.size), expected)
    for bad in [(3.0, 0.5, -12.5, 20), (3.0, 0.5, -12), Window(), np.zeros(2, AFFINE)]:
        with pytest.raises(TypeError, match=r"parameter 3 \(Affine a\)"):
            affine.launch(1, 128, upload(device, x), out, x.size, bad)

    image = rng().standard_normal((20, 30), dtype=np.float32)
    crop = module.get_kernel("crop")
    window = Window(4, 3, 17, 11)
    cropped = device.allocate(4 * 17 * 11)
    crop.launch((2, 2), (16, 8), upload(device, image), cropped, 30, window)
    np.testing.assert_array_equal(
        download(device, cropped, np.float32, (11, 17)), image[3:14, 4:21]
    )
    with pytest.raises(TypeError, match=r"parameter 3 \(const img::Window w\)"):
        crop.launch((2, 2), (16, 8), upload(device, image), cropped, 30, (4, 3, 17.0, 11))


def test_deprecated_spellings_and_the_platform_macro(device: Device, load: Load) -> None:
    block, grid = (4, 2, 2), (2, 3, 1)
    threads = 4 * 2 * 2 * 2 * 3
    out, platform = device.allocate(4 * threads), upload(device, np.full(1, -1, np.int32))
    kernel = load("deprecated.hip").get_kernel("old_spellings")
    kernel.launch(grid, block, out, platform, shared_mem=16 * 4)
    np.testing.assert_array_equal(download(device, out, np.int32, threads), np.arange(threads) + 1)
    code = {"amd": 1, "nvidia": 2, "cpu": 3}[hip_api().platform]
    assert download(device, platform, np.int32, 1)[0] == code


def test_warp_shuffle_reduction_without_an_include(device: Device, load: Load) -> None:
    x = rng().standard_normal(20_000, dtype=np.float32)
    total = upload(device, np.zeros(1, np.float32))
    load("warp_reduce.hip").get_kernel("block_sum").launch(8, 256, upload(device, x), total, x.size)
    np.testing.assert_allclose(
        download(device, total, np.float32, 1)[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3
    )
