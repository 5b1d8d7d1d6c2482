/* __half (IEEE binary16) and __hip_bfloat16 (bfloat16) on the host (part of
 * hip_cpu_prelude.h). Storage is the 16 raw bits; arithmetic happens in float. Conversions
 * from float round to nearest, ties to even, with correct subnormals, infinities and NaNs
 * (a NaN stays a quiet NaN); conversions to float are exact. The API follows hip_fp16.h /
 * hip_bf16.h (which match CUDA's cuda_fp16.h / cuda_bf16.h): like there, operators take two
 * halves, so mixing `__half + float` is ambiguous; convert explicitly.
 */
#ifndef HIP_CPU_FP16_H
#define HIP_CPU_FP16_H

namespace hipcpu {
static inline unsigned short f32_to_f16(float f) {
    unsigned int x = bit_cast<unsigned int>(f);
    unsigned int sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u)  // inf, or NaN made quiet (payload kept)
        return (unsigned short)(sign | (a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u));
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (a >= 0x38800000u) {  // a normal half: re-bias the exponent, round 13 bits away
        unsigned int r = a - 0x38000000u, h = r >> 13, rest = r & 0x1fffu;
        h += (rest > 0x1000u) | ((rest == 0x1000u) & (h & 1u));
        return (unsigned short)(sign | h);
    }
    if (a <= 0x33000000u) return (unsigned short)sign;  // <= 2^-25 rounds (ties-to-even) to 0
    unsigned int e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;  // 14..24
    unsigned int h = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    h += (rest > half) | ((rest == half) & (h & 1u));
    return (unsigned short)(sign | h);
}
static inline float f16_to_f32(unsigned short h) {
    unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
        float f = (float)m * 5.9604644775390625e-08f;
        return bit_cast<float>(bit_cast<unsigned int>(f) | sign);
    }
    if (e == 31) return bit_cast<float>(sign | 0x7f800000u | (m << 13));
    return bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}
static inline unsigned short f64_to_f16(double d) {
    // Direct rounding (not through float, which would round twice).
    if (std::isnan(d)) return (unsigned short)(std::signbit(d) ? 0xfe00u : 0x7e00u);
    unsigned int sign = std::signbit(d) ? 0x8000u : 0u;
    double a = std::fabs(d);
    if (a >= 65520.0) return (unsigned short)(sign | 0x7c00u);
    if (a < 6.103515625e-05) return (unsigned short)(sign | (unsigned int)std::nearbyint(std::ldexp(a, 24)));
    int exponent;
    std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
    unsigned int s = (unsigned int)std::nearbyint(std::ldexp(a, 11 - exponent));  // 1024..2048
    unsigned int biased = (unsigned int)(exponent - 1 + 15);
    if (s == 2048u) s = 1024u, ++biased;
    if (biased >= 31u) return (unsigned short)(sign | 0x7c00u);
    return (unsigned short)(sign | (biased << 10) | (s - 1024u));
}
static inline unsigned short f32_to_bf16(float f) {
    unsigned int x = bit_cast<unsigned int>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
static inline float bf16_to_f32(unsigned short b) { return bit_cast<float>((unsigned int)b << 16); }
}  // namespace hipcpu

/* ---- __half ------------------------------------------------------------------------------ */
struct __half_raw {
    unsigned short x;
};
struct __half {
    unsigned short __x;
    __half() = default;  // trivial, so __half works in __shared__ (thread_local) arrays
    constexpr __half(__half_raw r) : __x(r.x) {}
    __half(float f) : __x(hipcpu::f32_to_f16(f)) {}
    __half(double d) : __x(hipcpu::f64_to_f16(d)) {}
    __half(int i) : __x(hipcpu::f64_to_f16((double)i)) {}
    __half(unsigned int i) : __x(hipcpu::f64_to_f16((double)i)) {}
    __half(long long i) : __x(hipcpu::f64_to_f16((double)i)) {}
    __half(unsigned long long i) : __x(hipcpu::f64_to_f16((double)i)) {}
    __half(short i) : __x(hipcpu::f64_to_f16((double)i)) {}
    __half(unsigned short i) : __x(hipcpu::f64_to_f16((double)i)) {}
    operator float() const { return hipcpu::f16_to_f32(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
};
typedef __half half;
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
};
typedef __half2 half2;

static inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short s) { return __ushort_as_half((unsigned short)s); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half(d); }
static inline float __half2float(__half h) { return hipcpu::f16_to_f32(h.__x); }
static inline int __half2int_rn(__half h) { return (int)nearbyintf(__half2float(h)); }
static inline __half __int2half_rn(int i) { return __half(i); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
static inline __half2 make_half2(__half a, __half b) { return __half2{a, b}; }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
static inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
static inline __half2 __float22half2_rn(float2 v) { return __floats2half2_rn(v.x, v.y); }
static inline float2 __half22float2(__half2 v) { return float2{__half2float(v.x), __half2float(v.y)}; }
static inline __half __low2half(__half2 v) { return v.x; }
static inline __half __high2half(__half2 v) { return v.y; }
static inline float __low2float(__half2 v) { return __half2float(v.x); }
static inline float __high2float(__half2 v) { return __half2float(v.y); }

#define HIPCPU_HALF_ARITH(H, TOF)                                                            \
    static inline H __hadd(H a, H b) { return H(TOF(a) + TOF(b)); }                          \
    static inline H __hsub(H a, H b) { return H(TOF(a) - TOF(b)); }                          \
    static inline H __hmul(H a, H b) { return H(TOF(a) * TOF(b)); }                          \
    static inline H __hdiv(H a, H b) { return H(TOF(a) / TOF(b)); }                          \
    static inline H __hfma(H a, H b, H c) { return H((double)TOF(a) * TOF(b) + TOF(c)); }    \
    static inline H __hneg(H a) { return H(-TOF(a)); }                                       \
    static inline H __habs(H a) { return H(fabsf(TOF(a))); }                                 \
    static inline H __hmax(H a, H b) { return H(fmaxf(TOF(a), TOF(b))); }                    \
    static inline H __hmin(H a, H b) { return H(fminf(TOF(a), TOF(b))); }                    \
    static inline bool __heq(H a, H b) { return TOF(a) == TOF(b); }                          \
    static inline bool __hne(H a, H b) { return TOF(a) != TOF(b); }                          \
    static inline bool __hlt(H a, H b) { return TOF(a) < TOF(b); }                           \
    static inline bool __hle(H a, H b) { return TOF(a) <= TOF(b); }                          \
    static inline bool __hgt(H a, H b) { return TOF(a) > TOF(b); }                           \
    static inline bool __hge(H a, H b) { return TOF(a) >= TOF(b); }                          \
    static inline bool __hisnan(H a) { return std::isnan(TOF(a)); }                          \
    static inline int __hisinf(H a) { return std::isinf(TOF(a)) ? (TOF(a) < 0 ? -1 : 1) : 0; } \
    static inline H operator+(H a, H b) { return __hadd(a, b); }                             \
    static inline H operator-(H a, H b) { return __hsub(a, b); }                             \
    static inline H operator*(H a, H b) { return __hmul(a, b); }                             \
    static inline H operator/(H a, H b) { return __hdiv(a, b); }                             \
    static inline H operator-(H a) { return __hneg(a); }                                     \
    static inline H operator+(H a) { return a; }                                             \
    static inline H& operator+=(H& a, H b) { return a = a + b; }                             \
    static inline H& operator-=(H& a, H b) { return a = a - b; }                             \
    static inline H& operator*=(H& a, H b) { return a = a * b; }                             \
    static inline H& operator/=(H& a, H b) { return a = a / b; }                             \
    static inline bool operator==(H a, H b) { return __heq(a, b); }                          \
    static inline bool operator!=(H a, H b) { return __hne(a, b); }                          \
    static inline bool operator<(H a, H b) { return __hlt(a, b); }                           \
    static inline bool operator<=(H a, H b) { return __hle(a, b); }                          \
    static inline bool operator>(H a, H b) { return __hgt(a, b); }                           \
    static inline bool operator>=(H a, H b) { return __hge(a, b); }
HIPCPU_HALF_ARITH(__half, __half2float)

static inline __half hsqrt(__half a) { return __half(sqrtf(__half2float(a))); }
static inline __half hexp(__half a) { return __half(expf(__half2float(a))); }
static inline __half hlog(__half a) { return __half(logf(__half2float(a))); }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __half2{a.x - b.x, a.y - b.y}; }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}

/* ---- bfloat16 ------------------------------------------------------------------------------ */
/* __hip_bfloat16 is HIP's name (hip_bf16.h, ROCm >= 6); hip_bfloat16 (ROCm 5's class, same
 * 16-bit layout and rounding) is an alias. */
struct __hip_bfloat16 {
    unsigned short data;
    __hip_bfloat16() = default;
    __hip_bfloat16(float f) : data(hipcpu::f32_to_bf16(f)) {}
    __hip_bfloat16(double d) : data(hipcpu::f32_to_bf16((float)d)) {}
    __hip_bfloat16(int i) : data(hipcpu::f32_to_bf16((float)i)) {}
    operator float() const { return hipcpu::bf16_to_f32(data); }
};
typedef __hip_bfloat16 hip_bfloat16;
struct __attribute__((aligned(4))) __hip_bfloat162 {
    __hip_bfloat16 x, y;
};

static inline __hip_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __hip_bfloat16 b;
    b.data = u;
    return b;
}
static inline unsigned short __bfloat16_as_ushort(__hip_bfloat16 b) { return b.data; }
static inline __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
static inline __hip_bfloat16 __float2bfloat16_rn(float f) { return __hip_bfloat16(f); }
static inline float __bfloat162float(__hip_bfloat16 b) { return hipcpu::bf16_to_f32(b.data); }
static inline __hip_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __hip_bfloat162{__hip_bfloat16(a), __hip_bfloat16(b)};
}
static inline float __low2float(__hip_bfloat162 v) { return __bfloat162float(v.x); }
static inline float __high2float(__hip_bfloat162 v) { return __bfloat162float(v.y); }
HIPCPU_HALF_ARITH(__hip_bfloat16, __bfloat162float)
#undef HIPCPU_HALF_ARITH

#endif /* HIP_CPU_FP16_H */
