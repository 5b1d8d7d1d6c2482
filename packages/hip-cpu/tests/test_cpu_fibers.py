"""The cpu platform's fibers over many blocks: a launch's blocks on one OS thread reuse the
fibers of the first block that waited (each parks at its thread's end and runs the same thread
of the next block), so these launches have hundreds of blocks per worker thread, and each
kernel waits in a way the scheduler handles apart: threads that exit before the first wait
(the converting thread is not thread 0), 2D blocks that are not whole warps, a warp sync
reached by some lanes while the others wait at the block barrier, __syncthreads_count, blocks
that wait and blocks that do not in one launch, and a fault in a late block. Warps of 32 and
64 lanes (the program's -mno-wavefrontsize64 / -mwavefrontsize64)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi
from hip_ffi import constants
from hip_ffi.rtc import compile_source

ILLEGAL = constants.ERROR_CODES["hipErrorIllegalAddress"]
SOURCE = rb"""
// Threads below `skip` exit at once; the others sum their values through a tree over
// blockDim.x * blockDim.y - skip slots, and count the positive ones with __syncthreads_count.
extern "C" __global__ void tree_sum(const float* x, float* sums, int* counts, int skip) {
    __shared__ float s[1024];
    const int n = blockDim.x * blockDim.y, t = threadIdx.x + blockDim.x * threadIdx.y;
    const float v = x[blockIdx.x * n + t];
    if (t < skip) return;
    const int i = t - skip, m = n - skip;
    s[i] = v;
    const int positive = __syncthreads_count(v > 0.0f);
    for (int stride = 1; stride < m; stride *= 2) {
        if (i % (2 * stride) == 0 && i + stride < m) s[i] += s[i + stride];
        __syncthreads();
    }
    if (i == 0) {
        sums[blockIdx.x] = s[0];
        counts[blockIdx.x] = positive;
    }
}
// Odd lanes take a ballot (a warp sync of the odd lanes only) while even lanes are already
// at the block barrier; each warp's lane 1 leaves the count, thread 0 adds them up.
extern "C" __global__ void odd_ballots(const float* x, int* out) {
    __shared__ int per_warp[32];
    const int t = threadIdx.x, lane = t % warpSize;
    const bool positive = x[blockIdx.x * blockDim.x + t] > 0.0f;
    if (lane & 1) {
        const unsigned long long votes = __ballot(positive);
        if (lane == 1) per_warp[t / warpSize] = __popcll(votes);
    }
    __syncthreads();
    if (t == 0) {
        int total = 0;
        for (int w = 0; w < (int)(blockDim.x / warpSize); ++w) total += per_warp[w];
        out[blockIdx.x] = total;
    }
}
// Every third block reverses its values through shared memory; the others copy them.
extern "C" __global__ void some_blocks_wait(const int* x, int* y) {
    __shared__ int s[256];
    const int t = threadIdx.x, at = blockIdx.x * blockDim.x + t;
    int v = x[at];
    if (blockIdx.x % 3 == 1) {
        s[t] = v;
        __syncthreads();
        v = s[blockDim.x - 1 - t];
    }
    y[at] = v;
}
// A barrier, then thread 5 of block `bad` writes far out of range.
extern "C" __global__ void late_fault(int* y, long long far, int bad) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    const int v = s[63 - threadIdx.x];
    if ((int)blockIdx.x == bad && threadIdx.x == 5) y[far] = v;
    else y[blockIdx.x * 64 + threadIdx.x] = v;
}
"""
BLOCKS = 2048  # hundreds of blocks per worker thread: their fibers are reused
WARPS = {32: "-mno-wavefrontsize64", 64: "-mwavefrontsize64"}


@pytest.fixture(scope="module", params=sorted(WARPS))
def run(request: pytest.FixtureRequest) -> Iterator[Any]:
    runner = cases.Runner(hip_ffi.load("cpu"))
    result = compile_source(runner.hip, SOURCE, name="fibers.hip", options=[WARPS[request.param]])
    assert result.ok, result.log
    module = runner.ffi.new("hipModule_t*")
    assert runner.hip.hipModuleLoadData(module, result.code) == 0
    runner._modules["fibers.hip"] = module[0]
    runner.warp_size = request.param
    yield runner
    runner.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(17)


@pytest.mark.parametrize(("block", "skip"), [((256, 1), 0), ((20, 10), 0), ((20, 10), 37)])
def test_tree_sums_and_counts_with_exited_threads(
    run: Any, rng: np.random.Generator, block: tuple[int, int], skip: int
) -> None:
    n = block[0] * block[1]
    x = rng.standard_normal((BLOCKS, n)).astype(np.float32)
    sums, counts = run.output(BLOCKS, np.float32), run.output(BLOCKS, np.int32)
    arguments = (cases.ptr(run.upload(x)), cases.ptr(sums), cases.ptr(counts), cases.i32(skip))
    run.launch("fibers.hip", "tree_sum", (BLOCKS, 1, 1), (*block, 1), *arguments)
    live = x[:, skip:]
    np.testing.assert_allclose(
        run.download(sums, BLOCKS, np.float32), live.astype(np.float64).sum(axis=1), atol=1e-3
    )
    np.testing.assert_array_equal(run.download(counts, BLOCKS, np.int32), (live > 0).sum(axis=1))


def test_a_warp_sync_of_some_lanes_beside_the_block_barrier(
    run: Any, rng: np.random.Generator
) -> None:
    threads = 256
    x = rng.standard_normal((BLOCKS, threads)).astype(np.float32)
    out = run.output(BLOCKS, np.int32)
    run.launch("fibers.hip", "odd_ballots", (BLOCKS, 1, 1), (threads, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(out))  # fmt: skip
    odd = (np.arange(threads) % run.warp_size) % 2 == 1
    np.testing.assert_array_equal(run.download(out, BLOCKS, np.int32), (x[:, odd] > 0).sum(axis=1))


def test_blocks_that_wait_beside_blocks_that_do_not(run: Any, rng: np.random.Generator) -> None:
    threads = 256
    x = rng.integers(-1000, 1000, (BLOCKS, threads), dtype=np.int32)
    y = run.output(BLOCKS * threads, np.int32)
    run.launch("fibers.hip", "some_blocks_wait", (BLOCKS, 1, 1), (threads, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(y))  # fmt: skip
    expected = x.copy()
    expected[1::3] = x[1::3, ::-1]
    np.testing.assert_array_equal(run.download(y, (BLOCKS, threads), np.int32), expected)


def test_a_fault_in_a_late_block_and_the_next_launch(run: Any) -> None:
    y = run.output(BLOCKS * 64, np.int32)
    bad = BLOCKS - 3
    run.launch("fibers.hip", "late_fault", (BLOCKS, 1, 1), (64, 1, 1),
               cases.ptr(y), ("long long", 1 << 46), cases.i32(bad))  # fmt: skip
    status = run.hip.hipDeviceSynchronize()
    assert status == ILLEGAL
    assert f"block [{bad},0,0], thread [5,0,0]" in run.hip.error_detail(status)
    run.launch("fibers.hip", "late_fault", (BLOCKS, 1, 1), (64, 1, 1),
               cases.ptr(y), ("long long", 0), cases.i32(-1))  # fmt: skip
    expected = np.tile(np.arange(63, -1, -1, dtype=np.int32), BLOCKS)
    np.testing.assert_array_equal(run.download(y, BLOCKS * 64, np.int32), expected)
