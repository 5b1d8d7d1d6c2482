// 16-bit float loads and stores: y = a * x + b computed in float, rounded to nearest even.
// __half is built into hiprtc; nvrtc (NVIDIA) and the cpu platform take it from
// <hip/hip_fp16.h>, which ROCm 5.2's hiprtc cannot include (hence the #if). bfloat16 travels as
// its 16 bits: ROCm 5.2's hiprtc has no bfloat16 type, so there the kernel converts the bits
// itself; elsewhere it uses __hip_bfloat16 and its conversion functions.

#if defined(__CUDACC__) || defined(__HIP_PLATFORM_CPU__)
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
#define HAVE_BF16_TYPE 1
#else
#define HAVE_BF16_TYPE 0
#endif

extern "C" __global__ void affine_f16(const __half* x, __half* y, float a, float b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(a * __half2float(x[i]) + b);
}

// The f16 values through f32 and back unchanged: out32 = float(x), back = half(out32).
extern "C" __global__ void roundtrip_f16(const __half* x, float* out32, __half* back, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out32[i] = __half2float(x[i]);
        back[i] = __float2half(out32[i]);
    }
}

extern "C" __global__ void affine_bf16(const unsigned short* x, unsigned short* y, float a, float b,
                                       int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#if HAVE_BF16_TYPE
    const float v = a * __bfloat162float(__ushort_as_bfloat16(x[i])) + b;
    y[i] = __bfloat16_as_ushort(__float2bfloat16(v));
#else
    const float v = a * __uint_as_float((unsigned int)x[i] << 16) + b;
    unsigned int u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        y[i] = (unsigned short)((u >> 16) | 0x40u);  // NaN stays a quiet NaN
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
        y[i] = (unsigned short)(u >> 16);
    }
#endif
}

// f32 -> f16 and f32 -> bf16 conversions of arbitrary floats (rounding, overflow, subnormals).
extern "C" __global__ void narrow_f32(const float* x, __half* h, unsigned short* bf, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    h[i] = __float2half(x[i]);
#if HAVE_BF16_TYPE
    bf[i] = __bfloat16_as_ushort(__float2bfloat16(x[i]));
#else
    unsigned int u = __float_as_uint(x[i]);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        bf[i] = (unsigned short)((u >> 16) | 0x40u);
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);
        bf[i] = (unsigned short)(u >> 16);
    }
#endif
}
