// HIP corpus: the explicitly rounded arithmetic intrinsics (float: round to nearest even,
// toward zero, up, down; double: to nearest, the only ones HIP documents) and a few math
// functions HIP documents. ROCm 5's hiprtc has only the _rn ones (newer releases need
// -DOCML_BASIC_ROUNDED_OPERATIONS for the others): on AMD the kernel uses those alone.
#include <hip/hip_runtime.h>

__global__ void rounded_f32(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float* o = out + 20 * i;
#if defined(__HIP_PLATFORM_AMD__)  // hiprtc before ROCm 6 has only the _rn ones
    for (int k = 0; k < 19; ++k) o[k] = 0.0f;
    o[0] = __fadd_rn(x, y); o[4] = __fmul_rn(x, y); o[8] = __fdiv_rn(x, y); o[12] = __fsqrt_rn(fabsf(x));
#else
    o[0] = __fadd_rn(x, y); o[1] = __fadd_rz(x, y); o[2] = __fadd_ru(x, y); o[3] = __fadd_rd(x, y);
    o[4] = __fmul_rn(x, y); o[5] = __fmul_rz(x, y); o[6] = __fmul_ru(x, y); o[7] = __fmul_rd(x, y);
    o[8] = __fdiv_rn(x, y); o[9] = __fdiv_rz(x, y); o[10] = __fdiv_ru(x, y); o[11] = __fdiv_rd(x, y);
    float s = fabsf(x);
    o[12] = __fsqrt_rn(s); o[13] = __fsqrt_rz(s); o[14] = __fsqrt_ru(s); o[15] = __fsqrt_rd(s);
    o[16] = __fsub_rz(x, y); o[17] = __frcp_ru(y); o[18] = __fmaf_rd(x, y, 1.0f);
#endif
    o[19] = norm3df(x, y, 2.0f) * rhypotf(x, y);
}

__global__ void rounded_f64(const double* a, const double* b, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    double* o = out + 8 * i;
    o[0] = __dadd_rn(x, y); o[1] = __dsub_rn(x, y); o[2] = __dmul_rn(x, y); o[3] = __ddiv_rn(x, y);
    o[4] = __fma_rn(x, y, 1.0); o[5] = __dsqrt_rn(fabs(x));
    o[6] = __hiloint2double(__double2hiint(x), __double2loint(x));
    o[7] = (double)cyl_bessel_i0f((float)y);
}
