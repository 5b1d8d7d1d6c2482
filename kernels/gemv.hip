// The GEMV kernel's entry points, one product a launch: kernels/gemv.h says what they compute
// and how the work is spread for R = 1, 2, 4, 8 rows, kernels/gemv_mma.h for the 16-row tile
// (gemv_chain.hip runs several products in one launch).
//
//   gemv_r<R>_<t>, gemv_norm_r<R>_<t>, gemv_swiglu_r<R>_<t>(const T* w, const T* x, T* y,
//       const T* residual, const T* norm, int n, int k, int rows, int slices, float eps,
//       long long xs, long long ys, long long rs)                     R = 1, 2, 4, 8, 16
#include "gemv.h"
#include "gemv_mma.h"  // the 16-row tile

// Entry points: per fusion and row tile R, for each storage type T (written out: hip-core
// reads the parameter types from the text).
#define HIPK_GEMV(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_r1_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<1>::floats]; \
        hipk::gemv::run<T, 1, false, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_r2_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<2>::floats]; \
        hipk::gemv::run<T, 2, false, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_r4_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<4>::floats]; \
        hipk::gemv::run<T, 4, false, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_r8_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<8>::floats]; \
        hipk::gemv::run<T, 8, false, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_r16_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::TileScratch<false>::floats]; \
        hipk::gemv::run_tile<T, false, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                              xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_norm_r16_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::TileScratch<false>::floats]; \
        hipk::gemv::run_tile<T, true, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                             xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_swiglu_r16_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::TileScratch<true>::floats]; \
        hipk::gemv::run_tile<T, true, true>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                            xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_norm_r1_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<1>::floats]; \
        hipk::gemv::run<T, 1, true, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_norm_r2_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<2>::floats]; \
        hipk::gemv::run<T, 2, true, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_norm_r4_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<4>::floats]; \
        hipk::gemv::run<T, 4, true, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_norm_r8_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<8>::floats]; \
        hipk::gemv::run<T, 8, true, false>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_swiglu_r1_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<1>::floats]; \
        hipk::gemv::run<T, 1, true, true>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_swiglu_r2_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<2>::floats]; \
        hipk::gemv::run<T, 2, true, true>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_swiglu_r4_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<4>::floats]; \
        hipk::gemv::run<T, 4, true, true>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_swiglu_r8_##S( \
        const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k, int rows, \
        int slices, float eps, long long xs, long long ys, long long rs) { \
        __shared__ float scratch[hipk::gemv::Scratch<8>::floats]; \
        hipk::gemv::run<T, 8, true, true>(w, x, y, residual, norm, n, k, rows, slices, eps, \
                                           xs, ys, rs, (int)blockIdx.x, scratch); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GEMV)
