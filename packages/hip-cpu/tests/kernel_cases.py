"""Kernel test cases that run unchanged on any platform: cpu in CI, nvidia on the H200.

Every case compiles a kernel file of `kernels/` with the platform's hiprtc (`--offload-arch=`
the device's gcnArchName), runs it through the HIP surface only, and compares with numpy on
fresh random inputs. Outputs are poisoned (0xFF bytes) before a launch, so a result the kernel
did not write cannot pass. Not a conftest: test modules import it by path, so pytest's importlib
mode needs no package layout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hip_ffi import constants
from hip_ffi.api import HipApi
from hip_ffi.rtc import compile_source

KERNELS = Path(__file__).resolve().parent / "kernels"
H2D, D2H = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
HIPRTC_ERROR_COMPILATION = constants.HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"]


def kernel_files() -> list[Path]:
    return sorted(KERNELS.glob("*.hip"))


class Runner:
    """Compiles, loads, allocates and launches through one HipApi; frees everything on close."""

    def __init__(self, hip: HipApi) -> None:
        self.hip = hip
        self.ffi = hip.ffi
        props = self.ffi.new(hip.device_prop_type + "*")
        self.check(hip.hipGetDeviceProperties(props, 0), "hipGetDeviceProperties")
        self.arch = self.ffi.string(props.gcnArchName).decode()
        self.warp_size = int(props.warpSize)
        self._modules: dict[str, Any] = {}
        self._allocations: list[Any] = []

    def check(self, status: int, call: str) -> None:
        if status != 0:
            name = self.ffi.string(self.hip.hipGetErrorName(status)).decode()
            raise AssertionError(f"{call} failed: {name} ({status})")

    def compile(self, source: bytes, name: str) -> tuple[int, bytes, str]:
        """(hiprtcResult, code object, log) for `source`."""
        result = compile_source(
            self.hip, source, name=name, options=[f"--offload-arch={self.arch}"]
        )
        return result.status, result.code, result.log

    def module(self, file: str) -> Any:
        if file not in self._modules:
            result, code, log = self.compile((KERNELS / file).read_bytes(), file)
            assert result == 0, f"compiling {file} failed:\n{log}"
            module = self.ffi.new("hipModule_t*")
            self.check(self.hip.hipModuleLoadData(module, code), "hipModuleLoadData")
            self._modules[file] = module[0]
        return self._modules[file]

    def function(self, file: str, name: str) -> Any:
        function = self.ffi.new("hipFunction_t*")
        self.check(self.hip.hipModuleGetFunction(function, self.module(file), name.encode()), name)
        return function[0]

    def alloc(self, nbytes: int) -> Any:
        pointer = self.ffi.new("void**")
        self.check(self.hip.hipMalloc(pointer, max(nbytes, 1)), "hipMalloc")
        self._allocations.append(pointer[0])
        return pointer[0]

    def upload(self, array: np.ndarray) -> Any:
        array = np.ascontiguousarray(array)
        pointer = self.alloc(array.nbytes)
        self.check(
            self.hip.hipMemcpy(pointer, self.ffi.from_buffer(array), array.nbytes, H2D),
            "hipMemcpy",
        )
        return pointer

    def output(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """Device memory for a result, filled with 0xFF bytes (NaN / -1) first."""
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        pointer = self.alloc(nbytes)
        self.check(self.hip.hipMemset(pointer, 0xFF, nbytes), "hipMemset")
        return pointer

    def download(self, pointer: Any, shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
        array = np.empty(shape, dtype=dtype)
        self.check(
            self.hip.hipMemcpy(self.ffi.from_buffer(array), pointer, array.nbytes, D2H),
            "hipMemcpy",
        )
        return array

    def launch(
        self,
        file: str,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        *args: tuple[str, Any],
        shared: int = 0,
        stream: Any = None,
    ) -> None:
        """Queue kernel(args) where each arg is (C type, value): ("void*", ptr), ("int", 3)."""
        boxes = [self.ffi.new(ctype + "*", value) for ctype, value in args]
        params = self.ffi.new("void*[]", [self.ffi.cast("void*", box) for box in boxes])
        self.check(
            self.hip.hipModuleLaunchKernel(
                self.function(file, kernel), *grid, *block, shared,
                stream if stream is not None else self.ffi.NULL, params, self.ffi.NULL,
            ),
            f"launching {kernel}",
        )  # fmt: skip

    def synchronize(self) -> None:
        self.check(self.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    def close(self) -> None:
        self.synchronize()
        for pointer in self._allocations:
            self.check(self.hip.hipFree(pointer), "hipFree")
        for module in self._modules.values():
            self.check(self.hip.hipModuleUnload(module), "hipModuleUnload")
        self._allocations.clear()
        self._modules.clear()


def ptr(pointer: Any) -> tuple[str, Any]:
    return ("void*", pointer)


def i32(value: int) -> tuple[str, int]:
    return ("int", value)


def i64(value: int) -> tuple[str, int]:
    return ("long long", value)


def f32(value: float) -> tuple[str, float]:
    return ("float", value)


def blocks(n: int, block: int) -> int:
    return -(-n // block)


Case = Callable[[Runner, np.random.Generator], None]
CASES: list[Case] = []


def case(function: Case) -> Case:
    CASES.append(function)
    return function


# ---- barriers and shared memory --------------------------------------------------------------


def _block_sum(run: Runner, rng: np.random.Generator, kernel: str, block: int) -> None:
    n, grid = 100_003, 37  # grid-stride: each block visits every 37th chunk of `block` elements
    x = rng.standard_normal(n).astype(np.float32)
    partial = run.output(grid, np.float32)
    run.launch("reduce.hip", kernel, (grid, 1, 1), (block, 1, 1),
               ptr(run.upload(x)), ptr(partial), i32(n))  # fmt: skip
    owner = (np.arange(n) // block) % grid
    expected = np.bincount(owner, weights=x.astype(np.float64), minlength=grid)
    got = run.download(partial, grid, np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


@case
def block_sum_shared_tree(run: Runner, rng: np.random.Generator) -> None:
    for block in (64, 256, 1024):
        _block_sum(run, rng, "block_sum_f32", block)


@case
def block_sum_warp_shuffles(run: Runner, rng: np.random.Generator) -> None:
    for block in (128, 1024):
        _block_sum(run, rng, "block_sum_warp_f32", block)


@case
def block_votes(run: Runner, rng: np.random.Generator) -> None:
    block, n = 128, 1000
    x = rng.standard_normal(n).astype(np.float32)
    x[:block] = np.abs(x[:block]) + 0.5  # block 0: every thread votes yes
    x[block : 2 * block] = -np.abs(x[block : 2 * block]) - 0.5  # block 1: nobody does
    grid = blocks(n, block)
    counts, any_, all_ = (run.output(grid, np.int32) for _ in range(3))
    run.launch("reduce.hip", "block_votes", (grid, 1, 1), (block, 1, 1),
               ptr(run.upload(x)), ptr(counts), ptr(any_), ptr(all_), i32(n))  # fmt: skip
    padded = np.zeros(grid * block, dtype=bool)
    padded[:n] = x > 0
    per_block = padded.reshape(grid, block)
    np.testing.assert_array_equal(run.download(counts, grid, np.int32), per_block.sum(1))
    np.testing.assert_array_equal(run.download(any_, grid, np.int32), per_block.any(1))
    np.testing.assert_array_equal(run.download(all_, grid, np.int32), per_block.all(1))


@case
def block_prefix_scan(run: Runner, rng: np.random.Generator) -> None:
    for block in (256, 1024):
        n = 5000
        x = rng.integers(-100, 100, n, dtype=np.int32)
        grid = blocks(n, block)
        y, totals = run.output(n, np.int32), run.output(grid, np.int32)
        run.launch("scan.hip", "block_scan_i32", (grid, 1, 1), (block, 1, 1),
                   ptr(run.upload(x)), ptr(y), ptr(totals), i32(n))  # fmt: skip
        padded = np.zeros(grid * block, dtype=np.int64)
        padded[:n] = x
        expected = np.cumsum(padded.reshape(grid, block), axis=1)
        np.testing.assert_array_equal(run.download(y, n, np.int32), expected.reshape(-1)[:n])
        np.testing.assert_array_equal(run.download(totals, grid, np.int32), expected[:, -1])


@case
def tiled_transpose_dynamic_shared(run: Runner, rng: np.random.Generator) -> None:
    rows, cols = 131, 77
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    source = run.upload(x)
    for tile, block_y in ((32, 8), (16, 16)):
        out = run.output((cols, rows), np.float32)
        grid = (blocks(cols, tile), blocks(rows, tile), 1)
        run.launch("transpose.hip", "transpose_tiled", grid, (tile, block_y, 1),
                   ptr(source), ptr(out), i32(rows), i32(cols), i32(tile),
                   shared=tile * (tile + 1) * 4)  # fmt: skip
        np.testing.assert_array_equal(run.download(out, (cols, rows), np.float32), x.T)


# ---- atomics ---------------------------------------------------------------------------------


@case
def histogram_atomics(run: Runner, rng: np.random.Generator) -> None:
    n = 1_000_003
    data = rng.integers(0, 256, n, dtype=np.uint8)
    data[:5000] = 7  # a hot bin: many colliding atomics
    bins = run.upload(np.zeros(256, dtype=np.uint32))
    run.launch("histogram.hip", "histogram_256", (64, 1, 1), (256, 1, 1),
               ptr(run.upload(data)), ptr(bins), i32(n))  # fmt: skip
    expected = np.bincount(data, minlength=256)
    np.testing.assert_array_equal(run.download(bins, 256, np.uint32), expected)


@case
def integer_and_float_atomics(run: Runner, rng: np.random.Generator) -> None:
    n = 100_000
    x = rng.integers(-1000, 1000, n, dtype=np.int32)
    start = np.array([0, np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, 0], dtype=np.int32)
    stats, fsum = run.upload(start), run.upload(np.zeros(1, dtype=np.float32))
    run.launch("histogram.hip", "atomic_stats", (16, 1, 1), (128, 1, 1),
               ptr(run.upload(x)), i32(n), ptr(stats), ptr(fsum))  # fmt: skip
    expected = [x.sum(), x.max(), x.min(), np.count_nonzero(x & 1), np.bitwise_or.reduce(x)]
    np.testing.assert_array_equal(run.download(stats, 5, np.int32), expected)
    # Every partial sum is an integer below 2^24, exact in float32 in any order.
    assert run.download(fsum, 1, np.float32)[0] == float(x.sum())


# ---- grids -----------------------------------------------------------------------------------


@case
def grid_stride_saxpy(run: Runner, rng: np.random.Generator) -> None:
    n, alpha = 1_000_003, np.float32(rng.uniform(-2, 2))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = run.upload(y)
    run.launch("elementwise.hip", "saxpy_grid_stride", (7, 1, 1), (128, 1, 1),
               f32(float(alpha)), ptr(run.upload(x)), ptr(out), i64(n))  # fmt: skip
    expected = alpha.astype(np.float64) * x + y
    np.testing.assert_allclose(run.download(out, n, np.float32), expected, rtol=1e-6, atol=1e-6)


@case
def vector_add_one_element_per_thread(run: Runner, rng: np.random.Generator) -> None:
    n = (1 << 20) + 5
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = run.output(n, np.float32)
    run.launch("elementwise.hip", "vector_add_f32", (blocks(n, 256), 1, 1), (256, 1, 1),
               ptr(run.upload(a)), ptr(run.upload(b)), ptr(c), i32(n))  # fmt: skip
    np.testing.assert_array_equal(run.download(c, n, np.float32), a + b)  # one rounding: exact


@case
def device_math_functions(run: Runner, rng: np.random.Generator) -> None:
    n = 10_000
    x = rng.uniform(-5, 5, n).astype(np.float32)
    y = run.output(n, np.float32)
    run.launch("elementwise.hip", "math_f32", (blocks(n, 128), 1, 1), (128, 1, 1),
               ptr(run.upload(x)), ptr(y), i32(n))  # fmt: skip
    d = x.astype(np.float64)
    expected = np.exp(d) / np.sqrt(1 + d * d) + np.maximum(d, 0)
    np.testing.assert_allclose(run.download(y, n, np.float32), expected, rtol=2e-6)


@case
def three_dimensional_grid_and_blocks(run: Runner, rng: np.random.Generator) -> None:
    nx, ny, nz = (int(v) for v in rng.integers(9, 40, 3))
    block = (8, 4, 2)
    grid = (blocks(nx, 8), blocks(ny, 4), blocks(nz, 2))
    out = run.output((nz, ny, nx), np.int32)
    run.launch("grid3d.hip", "coordinates_3d", grid, block, ptr(out), i32(nx), i32(ny), i32(nz))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    expected = x + 1000 * y + 1000000 * z
    np.testing.assert_array_equal(run.download(out, (nz, ny, nx), np.int32), expected)


@case
def two_dimensional_grid_block_ids(run: Runner, rng: np.random.Generator) -> None:
    nx, ny, block = 50, 30, (16, 8, 1)
    grid = (blocks(nx, 16), blocks(ny, 8), 1)
    out, shape = run.output((ny, nx), np.int32), run.output(6, np.int32)
    run.launch("grid3d.hip", "block_ids_2d", grid, block, ptr(out), ptr(shape), i32(nx), i32(ny))
    y, x = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    expected = (y // 8) * grid[0] + x // 16
    np.testing.assert_array_equal(run.download(out, (ny, nx), np.int32), expected)
    np.testing.assert_array_equal(run.download(shape, 6, np.int32), [*grid, *block])


# ---- 16-bit floats ---------------------------------------------------------------------------


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even, NaN kept quiet (the definition)."""
    u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between two arrays of 16-bit float bits."""

    def ordered(bits: np.ndarray) -> np.ndarray:
        signed = bits.astype(np.int32)
        return np.where(signed & 0x8000, 0x8000 - signed, signed)

    return np.abs(ordered(a) - ordered(b))


@case
def f16_loads_and_stores(run: Runner, rng: np.random.Generator) -> None:
    n, a, b = 4099, float(np.float32(rng.uniform(-3, 3))), float(np.float32(rng.uniform(-1, 1)))
    x = (rng.standard_normal(n) * 20).astype(np.float16)
    y = run.output(n, np.float16)
    run.launch("halfs.hip", "affine_f16", (blocks(n, 256), 1, 1), (256, 1, 1),
               ptr(run.upload(x)), ptr(y), f32(a), f32(b), i32(n))  # fmt: skip
    expected = (np.float32(a) * x.astype(np.float32) + np.float32(b)).astype(np.float16)
    got = run.download(y, n, np.float16)
    # A GPU (and -ffp-contract) may fuse a*x+b: a different float rounds to at most 1 ulp away.
    assert ulps_apart(got.view(np.uint16), expected.view(np.uint16)).max() <= 1


@case
def f16_every_value_round_trips(run: Runner, rng: np.random.Generator) -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = bits.view(np.float16)
    n = x.size
    wide, back = run.output(n, np.float32), run.output(n, np.float16)
    run.launch("halfs.hip", "roundtrip_f16", (blocks(n, 256), 1, 1), (256, 1, 1),
               ptr(run.upload(x)), ptr(wide), ptr(back), i32(n))  # fmt: skip
    got_wide, got_back = run.download(wide, n, np.float32), run.download(back, n, np.float16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(got_wide[~nan], x[~nan].astype(np.float32))  # exact
    np.testing.assert_array_equal(got_back.view(np.uint16)[~nan], bits[~nan])
    assert np.isnan(got_wide[nan]).all() and np.isnan(got_back[nan]).all()


@case
def bf16_loads_and_stores(run: Runner, rng: np.random.Generator) -> None:
    n, a, b = 4099, float(np.float32(rng.uniform(-3, 3))), float(np.float32(rng.uniform(-1, 1)))
    x = bf16_bits(rng.standard_normal(n).astype(np.float32) * 50)
    y = run.output(n, np.uint16)
    run.launch("halfs.hip", "affine_bf16", (blocks(n, 256), 1, 1), (256, 1, 1),
               ptr(run.upload(x)), ptr(y), f32(a), f32(b), i32(n))  # fmt: skip
    wide = (x.astype(np.uint32) << 16).view(np.float32)
    expected = bf16_bits(np.float32(a) * wide + np.float32(b))
    assert ulps_apart(run.download(y, n, np.uint16), expected).max() <= 1


@case
def f32_to_f16_and_bf16_rounding(run: Runner, rng: np.random.Generator) -> None:
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.996, 65520.0, 1e30, -1e30,
         2.0**-24, 2.0**-25, 2.0**-25 * 1.0001, 2.0**-26, 3 * 2.0**-25, 2.0**-14, 1e-40,
         1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 3.4e38, 1.00390625, 1.01171875],
        dtype=np.float32,
    )  # fmt: skip
    x = np.concatenate([
        specials,
        rng.standard_normal(3000).astype(np.float32) * 1000,
        rng.uniform(-2.0**-14, 2.0**-14, 1000).astype(np.float32),  # f16 subnormals
        # exact f16 ties: a representable value plus half an ulp
        (rng.integers(0x0400, 0x7BFF, 1000).astype(np.uint16).view(np.float16).astype(np.float32)
         * np.float32(1.0 + 2.0**-11)),
    ])  # fmt: skip
    n = x.size
    h, bf = run.output(n, np.float16), run.output(n, np.uint16)
    run.launch("halfs.hip", "narrow_f32", (blocks(n, 128), 1, 1), (128, 1, 1),
               ptr(run.upload(x)), ptr(h), ptr(bf), i32(n))  # fmt: skip
    got_h, got_bf = run.download(h, n, np.float16), run.download(bf, n, np.uint16)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        expected_h = x.astype(np.float16)  # numpy rounds to nearest even
    np.testing.assert_array_equal(got_h.view(np.uint16)[~nan], expected_h.view(np.uint16)[~nan])
    np.testing.assert_array_equal(got_bf[~nan], bf16_bits(x)[~nan])
    assert np.isnan(got_h[nan]).all()
    assert ((got_bf[nan] & 0x7F80) == 0x7F80).all() and (got_bf[nan] & 0x7F).all()


# ---- streams ---------------------------------------------------------------------------------


@case
def two_streams_joined_by_an_event(run: Runner, rng: np.random.Generator) -> None:
    """Stream B waits for an event recorded on stream A; only B is synchronized."""
    ffi, hip = run.ffi, run.hip
    n = 1 << 22
    x = run.upload(np.ones(n, dtype=np.float32))
    y = run.upload(np.zeros(n, dtype=np.float32))
    z = run.output(n, np.float32)
    streams = [ffi.new("hipStream_t*") for _ in range(2)]
    event, start = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    for s in streams:
        run.check(hip.hipStreamCreateWithFlags(s, constants.STREAM_NON_BLOCKING), "create")
    run.check(hip.hipEventCreateWithFlags(event, 0), "hipEventCreateWithFlags")
    run.check(hip.hipEventCreateWithFlags(start, 0), "hipEventCreateWithFlags")
    a, b = streams[0][0], streams[1][0]
    try:
        repeats = int(rng.integers(8, 12))
        run.check(hip.hipEventRecord(start[0], a), "hipEventRecord")
        for _ in range(repeats):  # long enough that B would overtake A without the event
            run.launch("elementwise.hip", "saxpy_grid_stride", (64, 1, 1), (256, 1, 1),
                       f32(1.0), ptr(x), ptr(y), i64(n), stream=a)  # fmt: skip
        run.check(hip.hipEventRecord(event[0], a), "hipEventRecord")
        run.check(hip.hipStreamWaitEvent(b, event[0], 0), "hipStreamWaitEvent")
        run.launch("elementwise.hip", "vector_add_f32", (blocks(n, 256), 1, 1), (256, 1, 1),
                   ptr(y), ptr(y), ptr(z), i32(n), stream=b)  # fmt: skip
        run.check(hip.hipStreamSynchronize(b), "hipStreamSynchronize")
        # B's work ran after A reached the event: A's work up to there is done and visible.
        assert hip.hipEventQuery(event[0]) == 0
        np.testing.assert_array_equal(run.download(z, n, np.float32), np.full(n, 2.0 * repeats))
        elapsed = ffi.new("float*")
        run.check(hip.hipEventElapsedTime(elapsed, start[0], event[0]), "hipEventElapsedTime")
        assert elapsed[0] > 0.0  # the saxpy launches took real time between the two events
    finally:
        for s in streams:
            run.check(hip.hipStreamDestroy(s[0]), "hipStreamDestroy")
        run.check(hip.hipEventDestroy(event[0]), "hipEventDestroy")
        run.check(hip.hipEventDestroy(start[0]), "hipEventDestroy")


# ---- compile errors --------------------------------------------------------------------------


@case
def compile_error_comes_back_in_the_log(run: Runner, rng: np.random.Generator) -> None:
    source = b'extern "C" __global__ void broken(float* x) {\n    x[0] = undeclared_name;\n}\n'
    result, code, log = run.compile(source, "broken.hip")
    assert result == HIPRTC_ERROR_COMPILATION and code == b""
    assert "undeclared_name" in log and "broken.hip" in log, log


def runner(hip: HipApi) -> Iterator[Runner]:
    """A Runner for a fixture: closed (everything freed) when the fixture ends."""
    run = Runner(hip)
    try:
        yield run
    finally:
        run.close()
