// Probe (raw CUDA, NVIDIA sm_90 only): does starting a kernel early (programmatic dependent
// launch, what hip-core's Kernel.start_early asks for) hide the fixed cost of a decode step's
// small GEMVs? A 1B Llama's products over 16 layers (QKV [3072, 2048], O [2048, 2048],
// gate/up [16384, 2048], down [2048, 8192], bf16, 1.95 GB: more than the L2), each reading
// the output of the one before, optionally with a latency-bound 8-block kernel standing in
// for attention, captured in one CUDA graph and replayed; µs a token and the fraction of the
// same run's device-to-device copy rate, for each way of starting early (MODE below).
//
//     nvcc -O3 -arch=sm_90 -o /tmp/early_start_probe bench/early_start_probe.cu
//     /tmp/early_start_probe
//
// It picked the shipped design (kernels/early_start.h, gemv.h): "L2line", an L2 prefetch of
// each team's first weight line before the wait, then the trigger (H200, 2026-12-03: 603.5 us
// plain, 586.9 waiting only, 560.4 L2line, 553.8 holding the first chunk in registers, which
// would read weights before the kernel ahead has finished: unsafe if it writes them). Bulk L2
// prefetches of more of the weights (modes 10-12, 2026-12-03 third session) were all slower:
// 691.4 us the block's whole rows, 621.7 their first 16 KiB; 757.2 against 713.1 with the
// attention stand-in prefetching the next product's weight (docs/benchmarks/README.md).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s line %d\n", #x, cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" :::); }

__device__ __forceinline__ void bulk_prefetch(const void* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&a);
    const __nv_bfloat162* q = reinterpret_cast<const __nv_bfloat162*>(&b);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 u = __bfloat1622float2(p[i]), v = __bfloat1622float2(q[i]);
        s += u.x * v.x + u.y * v.y;
    }
    return s;
}

// MODE 0 plain; 1 wait first; 2 first chunk in registers, trigger at start; 3 same, trigger
// after the loop; 4 L2 prefetch of the block's rows, trigger at start; 5 L2, trigger late;
// 6 all of a lane's chunks (<= 4) in registers before the wait, trigger at start; 7 the L2 line
// of the lane's first chunk (shipped), 8 wait then trigger, 9 the lines of its first two
// chunks; 10 the block's rows into L2 in bulk (cp.async.bulk.prefetch), 11 their first 16 KiB;
// 12 L2 lines as 7, the small kernel prefetching the next product's weight in bulk
template <int MODE>
__global__ void __launch_bounds__(256) gemv(const __nv_bfloat16* __restrict__ w,
                                            const __nv_bfloat16* x, __nv_bfloat16* y, int n,
                                            int k, int slices) {
    __shared__ float part[8];
    const int t = threadIdx.x, lane = t % 32, team = t / 32;
    const int groups = 8 / slices, group = team / slices, slice = team % slices;
    const int j0 = blockIdx.x * groups, j = j0 + group;
    const int chunks = k / 8, step = 32 * slices, c0 = slice * 32 + lane;
    const uint4* row = reinterpret_cast<const uint4*>(w + (size_t)j * k);
    uint4 first[4];
    if (MODE == 2 || MODE == 3) {
        if (j < n && c0 < chunks) first[0] = __ldg(row + c0);
    }
    if (MODE == 6) {
#pragma unroll
        for (int a = 0; a < 4; ++a)
            if (j < n && c0 + a * step < chunks) first[a] = __ldg(row + c0 + a * step);
    }
    if (MODE == 4 || MODE == 5) {
        const char* base = reinterpret_cast<const char*>(w + (size_t)j0 * k);
        const int lines = min(groups, n - j0) * k * 2 / 128;
        for (int l = t; l < lines; l += 256)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (size_t)l * 128));
    }
    if (MODE == 7 || MODE == 9 || MODE == 12) {  // the line of the lane's first chunk(s), into L2 only
        if (j < n && c0 < chunks && lane % 8 == 0)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(row + c0));
        if (MODE == 9 && j < n && c0 + step < chunks && lane % 8 == 0)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(row + c0 + step));
    }
    if (MODE == 10 || MODE == 11) {  // bulk L2 prefetch of the block's rows (11: first 16 KB)
        const char* base = reinterpret_cast<const char*>(w + (size_t)j0 * k);
        unsigned total = (unsigned)(min(groups, n - j0) * k * 2);
        if (MODE == 11) total = min(total, 16384u);
        const unsigned piece = 4096;
        for (unsigned o = t * piece; o < total; o += 256 * piece)
            bulk_prefetch(base + o, min(piece, total - o));
    }
    if (MODE == 2 || MODE == 4 || MODE == 6) pdl_trigger();
    if (MODE >= 1) pdl_wait();
    if (MODE >= 7) pdl_trigger();
    float acc = 0.f;
    if (j < n) {
        int a = 0;
        for (int c = c0; c < chunks; c += step, ++a) {
            uint4 wv;
            if ((MODE == 2 || MODE == 3) && c == c0) wv = first[0];
            else if (MODE == 6 && a < 4) wv = first[a & 3];
            else wv = __ldg(row + c);
            uint4 xv = *reinterpret_cast<const uint4*>(x + (size_t)c * 8);
            acc += dot8(wv, xv);
        }
    }
    if (MODE == 3 || MODE == 5) pdl_trigger();
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) part[team] = acc;
    __syncthreads();
    if (slice == 0 && lane == 0 && j < n) {
        float s = 0.f;
        for (int p = 0; p < slices; ++p) s += part[team + p];
        y[j] = __float2bfloat16(s * 1e-3f);
    }
}

// Latency-bound like decode attention at a short cache: 8 blocks, a few dependent loads.
template <int MODE>
__global__ void small(const __nv_bfloat16* q, const __nv_bfloat16* cache, __nv_bfloat16* out,
                      int steps, const char* next, unsigned next_bytes) {
    if (MODE >= 1) pdl_trigger();
    if (next) {  // MODE 12: the next product's weights into L2 while this kernel's latency runs
        const unsigned share = next_bytes / gridDim.x, piece = 16384;
        const char* base = next + (size_t)blockIdx.x * share;
        for (unsigned o = threadIdx.x * piece; o < share; o += blockDim.x * piece)
            bulk_prefetch(base + o, min(piece, share - o));
    }
    if (MODE >= 1) pdl_wait();
    float acc = __bfloat162float(q[blockIdx.x * 128 + threadIdx.x]);
    int idx = threadIdx.x;
    for (int s = 0; s < steps; ++s) {
        float v = __bfloat162float(cache[(idx + s * 1024) % 40000]);
        acc += v;
        idx = (idx + (int)(v * 0.f) + 37) % 40000;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2048; i += 128 * 8)
        out[blockIdx.x * 256 + (i % 256)] = __float2bfloat16(acc);
}

struct Product { int n, k, slices; __nv_bfloat16* w; };

// cudaLaunchKernelEx of `kernel`, started early (programmatic serialization) when `early`.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s, bool early,
            Args... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = early ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

template <int MODE> void launch_gemv(cudaStream_t s, const Product& p, const __nv_bfloat16* x,
                                     __nv_bfloat16* y) {
    const int groups = 8 / p.slices;
    launch(gemv<MODE>, dim3((p.n + groups - 1) / groups), dim3(256), s, MODE >= 1,
           (const __nv_bfloat16*)p.w, x, y, p.n, p.k, p.slices);
}

template <int MODE> void launch_small(cudaStream_t s, const __nv_bfloat16* q,
                                      const __nv_bfloat16* cache, __nv_bfloat16* out, int steps,
                                      const Product& next) {
    const char* ahead = MODE == 12 ? reinterpret_cast<const char*>(next.w) : nullptr;
    launch(small<MODE>, dim3(8), dim3(128), s, MODE >= 1, q, cache, out, steps, ahead,
           (unsigned)((size_t)next.n * next.k * 2));
}

struct Buffers { __nv_bfloat16 *h, *qkv, *att, *h2, *gu, *cache; };

template <int MODE>
float run(std::vector<Product>& layers, Buffers& b, int steps, bool with_small, int only) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (size_t l = 0; l < layers.size(); l += 4) {
        if (only < 0 || only == 0) launch_gemv<MODE>(s, layers[l + 0], b.h, b.qkv);
        if (with_small) launch_small<MODE>(s, b.qkv, b.cache, b.att, steps, layers[l + 1]);
        if (only < 0 || only == 1) launch_gemv<MODE>(s, layers[l + 1], b.att, b.h2);
        if (only < 0 || only == 2) launch_gemv<MODE>(s, layers[l + 2], b.h2, b.gu);
        if (only < 0 || only == 3) launch_gemv<MODE>(s, layers[l + 3], b.gu, b.h);
    }
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int reps = 40;
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    return ms * 1000.f / reps;
}

int main() {
    const int L = 16;
    std::vector<Product> layers;
    size_t bytes = 0;
    for (int l = 0; l < L; ++l) {
        Product ps[4] = {{3072, 2048, 2, 0}, {2048, 2048, 4, 0}, {16384, 2048, 1, 0},
                         {2048, 8192, 4, 0}};
        for (auto& p : ps) {
            size_t nb = (size_t)p.n * p.k * 2;
            CK(cudaMalloc(&p.w, nb));
            CK(cudaMemset(p.w, 1, nb));
            bytes += nb;
            layers.push_back(p);
        }
    }
    Buffers b;
    CK(cudaMalloc(&b.h, 1 << 20)); CK(cudaMalloc(&b.qkv, 1 << 20)); CK(cudaMalloc(&b.att, 1 << 20));
    CK(cudaMalloc(&b.h2, 1 << 20)); CK(cudaMalloc(&b.gu, 1 << 20)); CK(cudaMalloc(&b.cache, 1 << 20));
    for (auto p : {b.h, b.qkv, b.att, b.h2, b.gu, b.cache}) CK(cudaMemset(p, 0, 1 << 20));
    // copy rate
    void *src, *dst;
    size_t cb = 256u << 20;
    CK(cudaMalloc(&src, cb)); CK(cudaMalloc(&dst, cb));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) CK(cudaMemcpy(dst, src, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(dst, src, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
    const double copy = 2.0 * cb * 10 / (ms * 1e-3) / 1e9;
    printf("weights %.1f MB, copy rate %.0f GB/s, ideal %.1f us\n", bytes / 1e6, copy,
           bytes / copy / 1e3);
    const char* names[] = {"plain", "wait", "reg1+trig", "reg1+late", "L2+trig", "L2+late",
                           "reg4+trig", "L2line", "waittrig", "L2line2", "bulk", "bulk16K",
                           "smallpre"};
    float (*fns[])(std::vector<Product>&, Buffers&, int, bool, int) = {
        run<0>, run<1>, run<2>, run<3>, run<4>, run<5>, run<6>, run<7>, run<8>, run<9>, run<10>, run<11>, run<12>};
    for (int with_small = 0; with_small < 2; ++with_small) {
        for (int m : {0, 7, 10, 11, 12}) {
            float us = fns[m](layers, b, 24, with_small, -1);
            printf("%-10s small=%d  %8.1f us/token  %.3f of copy\n", names[m], with_small, us,
                   bytes / copy / 1e3 / us);
        }
    }
    const char* pn[] = {"qkv", "o", "gate/up", "down"};
    for (int only = 0; only < 4; ++only) {
        size_t pb = (size_t)layers[only].n * layers[only].k * 2 * L;
        for (int m : {7, 10, 11}) {
            float us = fns[m](layers, b, 24, false, only);
            printf("only %-8s %-10s %7.1f us (16 calls) %.2f us each, %.3f of copy\n", pn[only],
                   names[m], us, us / 16, pb / copy / 1e3 / us);
        }
    }
    return 0;
}
