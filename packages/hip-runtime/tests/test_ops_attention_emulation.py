"""The matrix-core attention paths in a host emulation, everywhere g++ is.

attention_mma.h (NVIDIA mma.sync) and attention_mfma.h (AMD MFMA) compile only for their GPUs.
Here their kernel code runs on the host with g++: 128 std::threads per block, warps (32) or
wave64s kept in step by barriers, and the matrix instructions replaced by functions that
follow the PTX ISA's m16n8k16 / ldmatrix layouts and MFMA 16x16x16's. It checks everything
but the vendors' layouts themselves: the fragment and swizzle indexing, the cp.async
pipeline's stages, masking, the online softmax, GQA and strides.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from typing import Any

import numpy as np
import pytest

from hip_runtime import testing
from hip_runtime.libraries import kernel_sources

EMULATION = r"""
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx;
static dim3 blockIdx, gridDim, blockDim = {128, 1, 1};
#define warpSize LANES
#define __device__
#define __global__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)
#define ALIGNED __attribute__((aligned(128)))
struct Barrier {  // reusable: waits for `count` arrivals per generation
    std::mutex m; std::condition_variable cv; int count, waiting = 0; long generation = 0;
    explicit Barrier(int n) : count(n) {}
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        const long g = generation;
        if (++waiting == count) { waiting = 0; ++generation; cv.notify_all(); return; }
        cv.wait(lock, [&] { return generation != g; });
    }
};
static Barrier* block_barrier;
static Barrier* lane_barrier[4];
static inline void __syncthreads() { block_barrier->wait(); }
static int block_or;  // __syncthreads_or's (rows.h includes it): every thread's read before a reset
static inline int __syncthreads_or(int predicate) {
    block_barrier->wait();
    if (threadIdx.x == 0) block_or = 0;
    block_barrier->wait();
    if (predicate) __atomic_fetch_or(&block_or, 1, __ATOMIC_SEQ_CST);
    block_barrier->wait();
    return block_or;
}
static inline int lane() { return threadIdx.x % LANES; }
static inline int group() { return threadIdx.x / LANES; }
static inline void step() { lane_barrier[group()]->wait(); }
static unsigned exchange[4][64][6];
static float values[4][64];
// every lane posts its words, then reads any lane's
static inline void post(const unsigned* w, int n) {
    for (int i = 0; i < n; ++i) exchange[group()][lane()][i] = w[i];
    step();
}
static inline float shuffle(float v, int mask) {
    values[group()][lane()] = v; step();
    const float r = values[group()][lane() ^ mask]; step();
    return r;
}
"""

# Both paths' primitives start with this (inside namespace hipk, where the 16-bit types are).
HALF_VALUE = r"""
static inline float half_value(int from, int word, int half, bool bf) {
    const unsigned w = exchange[group()][from][word];
    const unsigned short h = (unsigned short)(half ? w >> 16 : w & 0xffffu);
    return bf ? to_float(bf16{h}) : to_float(f16{h});
}
"""

MMA_PRIMITIVES = (
    HALF_VALUE
    + r"""
static char* shared_base;
static inline unsigned shared_address(const void* p) { shared_base = (char*)p; return 0; }
static inline unsigned short shared16(unsigned at) {
    unsigned short x;
    memcpy(&x, shared_base + at, 2);
    return x;
}
typedef const unsigned (&Words)[4];
static inline void mma_any(float (&c)[4], Words a, unsigned b0, unsigned b1, bool bf) {
    const unsigned w[6] = {a[0], a[1], a[2], a[3], b0, b1};
    post(w, 6);
    const int g = lane() / 4, t = lane() % 4;
    for (int e = 0; e < 4; ++e) {  // C[row][col] += sum_k A[row][k] B[k][col]
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        for (int k = 0; k < 16; ++k)
            c[e] += half_value((row % 8) * 4 + (k % 8) / 2, (row >= 8) + 2 * (k >= 8), k % 2, bf) *
                    half_value(col * 4 + (k % 8) / 2, 4 + (k >= 8), k % 2, bf);
    }
    step();
}
static inline void mma_16816(float (&c)[4], Words a, unsigned b0, unsigned b1, const bf16*) {
    mma_any(c, a, b0, b1, true);
}
static inline void mma_16816(float (&c)[4], Words a, unsigned b0, unsigned b1, const f16*) {
    mma_any(c, a, b0, b1, false);
}
static inline void ldmatrix_any(unsigned (&r)[4], unsigned address, bool trans) {
    if (address % 16) abort();
    post(&address, 1);
    const int l = lane();
    for (int i = 0; i < 4; ++i) {
        unsigned short lo, hi;
        if (!trans) {
            const unsigned row = exchange[group()][i * 8 + l / 4][0];
            lo = shared16(row + 4 * (l % 4)); hi = shared16(row + 4 * (l % 4) + 2);
        } else {
            lo = shared16(exchange[group()][i * 8 + 2 * (l % 4)][0] + 2 * (l / 4));
            hi = shared16(exchange[group()][i * 8 + 2 * (l % 4) + 1][0] + 2 * (l / 4));
        }
        r[i] = (unsigned)lo | ((unsigned)hi << 16);
    }
    step();
}
static inline void ldmatrix_x4(unsigned (&r)[4], unsigned at) { ldmatrix_any(r, at, false); }
static inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned at) { ldmatrix_any(r, at, true); }
static inline void copy16_async(unsigned address, const void* source, int bytes) {
    if (address % 16 || (uintptr_t)source % 16) abort();
    memset(shared_base + address, 0, 16);
    memcpy(shared_base + address, source, bytes);
}
static inline void async_commit() {}
static inline void async_wait_all() {}
template <int N> static inline void async_wait() {}
static inline float __shfl_xor_sync(unsigned, float v, int mask) { return shuffle(v, mask); }
static inline bool __any_sync(unsigned, bool p) {
    values[group()][lane()] = p ? 1.0f : 0.0f; step();
    bool any = false;
    for (int i = 0; i < LANES; ++i) any |= values[group()][i] != 0.0f;
    step(); return any;
}
"""
)

MFMA_PRIMITIVES = (
    HALF_VALUE
    + r"""
static inline void mfma_any(float (&c)[4], const Quad16& a, const Quad16& b, bool bf) {
    const unsigned w[4] = {a.w[0], a.w[1], b.w[0], b.w[1]};
    post(w, 4);
    const int col = lane() % 16, quad = lane() / 16;
    for (int e = 0; e < 4; ++e)  // D[4 quad + e][col]; A[i][k] in lane i + 16 (k / 4)
        for (int k = 0; k < 16; ++k)
            c[e] += half_value(4 * quad + e + 16 * (k / 4), (k % 4) / 2, k % 2, bf) *
                    half_value(col + 16 * (k / 4), 2 + (k % 4) / 2, k % 2, bf);
    step();
}
static inline void mfma_16x16x16(float (&c)[4], const Quad16& a, const Quad16& b, const bf16*) {
    mfma_any(c, a, b, true);
}
static inline void mfma_16x16x16(float (&c)[4], const Quad16& a, const Quad16& b, const f16*) {
    mfma_any(c, a, b, false);
}
static inline float shuffle_xor(float v, int mask) { return shuffle(v, mask); }
"""
)

RUNNER = r"""
extern "C" void run(int which, int gx, int gy, int gz, const void* q, const void* k, const void* v,
    void* out, const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, const long long* s) {
    Barrier block(128), w0(LANES), w1(LANES), w2(LANES), w3(LANES);
    block_barrier = &block; lane_barrier[0] = &w0; lane_barrier[1] = &w1;
    lane_barrier[2] = &w2; lane_barrier[3] = &w3;
    gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
    for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {
        blockIdx = {(unsigned)x, (unsigned)y, (unsigned)z};
        std::vector<std::thread> threads;
        for (int i = 0; i < 128; ++i) threads.emplace_back([=] {
            threadIdx = {(unsigned)i, 0, 0};
#define ARGS(T) (const T*)q, (const T*)k, (const T*)v, (T*)out, mask, mask_kind, heads, kv_heads, \
    sq, skv, d, scale, causal, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], \
    s[11], s[12], s[13], s[14], s[15]
            if (which == 0) attention_mma_d64_bf16(ARGS(hipk::bf16));
            if (which == 1) attention_mma_d64_f16(ARGS(hipk::f16));
            if (which == 2) attention_mma_d128_bf16(ARGS(hipk::bf16));
            if (which == 3) attention_mma_d128_f16(ARGS(hipk::f16));
            if (which == 4) attention_mma_d32_bf16(ARGS(hipk::bf16));
            if (which == 5) attention_mma_d32_f16(ARGS(hipk::f16));
        });
        for (auto& t : threads) t.join();
    }
}
"""

# Where each path's primitives start and end in its header (replaced by the emulated ones), and
# the condition that compiles the path.
PATHS = {
    "mma": ("attention_mma.h", "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800",
            "// D += A B for one m16n8k16", "// What chunk c of row r", MMA_PRIMITIVES, 32),
    "mfma": ("attention_mfma.h", "#if defined(__gfx90a__) || defined(__gfx942__)",
             "typedef short hipk_short4", "// Keys per LDS tile", MFMA_PRIMITIVES, 64),
}  # fmt: skip


# D = 128's tiles are dynamic shared memory (64 KiB); the emulation makes them a static array.
DYNAMIC_TILES = "extern __shared__ __align__(128) unsigned short tiles[]"


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """{path: run(q, k, v, causal, mask, views)} of the two paths built with g++."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ to build the emulation")
    folder = tmp_path_factory.mktemp("attention-emulation")
    found = {}
    for path, (header, condition, start, end, primitives, lanes) in PATHS.items():
        here = folder / path
        here.mkdir()
        for name, text in kernel_sources.headers().items():
            if name == header:
                assert condition in text and start in text and end in text, header
                text = text.replace(condition, "#if 1")
                primitives = primitives.replace("LANES", str(lanes))
                text = text[: text.index(start)] + primitives + text[text.index(end) :]
            (here / name).write_text(text)
        kernels = kernel_sources.sources()["attention.hip"]
        assert DYNAMIC_TILES in kernels
        kernels = kernels.replace(DYNAMIC_TILES, "static unsigned short tiles[32768] ALIGNED")
        source = EMULATION.replace("LANES", str(lanes)) + kernels
        source += RUNNER.replace("LANES", str(lanes))
        (here / "emulation.cpp").write_text(source.replace("LANES", str(lanes)))
        subprocess.run(
            [compiler, "-std=c++14", "-O0", "-shared", "-fPIC", "-pthread", "-w", f"-I{here}",
             "-o", str(here / "emulation.so"), str(here / "emulation.cpp")],
            check=True, capture_output=True,
        )  # fmt: skip
        found[path] = ctypes.CDLL(str(here / "emulation.so"))
    return found


def emulate(lib: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray, **how: Any) -> np.ndarray:
    """One emulated launch as the backend makes it ([B, S, H, D] storage with views=True)."""
    (batch, heads, sq, d), kv_heads, skv = q.shape, k.shape[1], k.shape[2]
    stored = []
    for x in (q, k, v):
        kept = np.ascontiguousarray(x.transpose(0, 2, 1, 3) if how["views"] else x)
        steps = [s // kept.itemsize for s in kept.strides]
        stored.append((kept, steps[:3] if not how["views"] else [steps[0], steps[2], steps[1]]))
    out = np.full(q.shape, np.nan, q.dtype)
    strides = [s for _, steps in stored for s in steps] + [s // 2 for s in out.strides[:3]]
    mask, kind = how["mask"], 0
    if mask is not None:
        mask = np.ascontiguousarray(mask)
        kind = 2 if mask.dtype == np.bool_ else 1
        full = np.broadcast_to(mask, (batch, heads, sq, skv))
        strides += [s // mask.itemsize for s in full.strides]
    else:
        strides += [0, 0, 0, 0]
    which = {64: 0, 128: 2, 32: 4}[d] + (q.dtype != testing.DTYPES["bf16"])
    pointer = lambda a: None if a is None else a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    lib.run(
        which, -(-sq // 128), heads, batch, *(pointer(x) for x, _ in stored), pointer(out),
        pointer(mask), kind, heads, kv_heads, sq, skv, d, ctypes.c_float(d**-0.5),
        int(how["causal"]), (ctypes.c_longlong * 16)(*strides),
    )  # fmt: skip
    return out


# (dtype, D, B, Hq, Hkv, Sq, Skv, causal, mask, views): two query blocks, several key tiles
# (more than the stages: the pipeline wraps), GQA, the causal diagonal with an offset, queries
# that see nothing, both masks, key-padding masks [B, 1, 1, Skv] (which D 32 reads once per
# key, a batch of them masked whole), [B, S, H, D]; several heads and batches (D 128's
# grid-wide block order).
EMULATED = [
    ("bf16", 128, 2, 2, 1, 150, 140, True, "none", True),
    ("f16", 64, 2, 2, 1, 70, 90, True, "additive", False),
    ("bf16", 64, 1, 1, 1, 40, 130, False, "bool", True),
    ("f16", 128, 2, 2, 1, 60, 110, False, "additive", False),
    ("bf16", 128, 2, 1, 1, 140, 90, True, "bool", True),
    ("bf16", 32, 2, 2, 1, 150, 140, True, "bool", True),
    ("f16", 32, 1, 2, 2, 70, 200, False, "additive", False),
    ("bf16", 32, 2, 2, 1, 130, 100, False, "keys", True),
    ("f16", 32, 2, 1, 1, 60, 150, True, "keys-additive", False),
]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_matrix_core_paths_in_a_host_emulation(emulated: Any, path: str) -> None:
    rng = np.random.default_rng(3)
    for dtype, d, batch, heads, kv_heads, sq, skv, causal, kind, views in EMULATED:
        q = testing.random(rng, (batch, heads, sq, d), dtype)
        k, v = (testing.random(rng, (batch, kv_heads, skv, d), dtype) for _ in range(2))
        mask = None
        if kind.startswith("keys"):  # [B, 1, 1, Skv]: the same for every query (key padding)
            mask = rng.random((batch, 1, 1, skv)) > 0.3
            mask[0, ..., :] = False  # batch 0 sees nothing
        elif kind != "none":
            mask = rng.random((sq, skv)) > 0.3
            mask[sq // 3] = False  # a query that sees nothing
        if kind.endswith("additive"):
            values = testing.random(rng, mask.shape, "f32")
            mask = np.where(mask, values, -np.inf).astype(q.dtype)
        got = emulate(emulated[path], q, k, v, causal=causal, mask=mask, views=views)
        testing.assert_close(got, testing.attention(q, k, v, causal=causal, mask=mask), dtype)
