/* HIP's explicitly rounded arithmetic (part of hip_cpu_math.h): __fadd_rz, __fmul_ru,
 * __dsqrt_rd ... in the four IEEE modes, and the conversions and special functions HIP
 * documents that the C++ library lacks (__hiloint2double, norm3df, rhypotf, cyl_bessel_i0f).
 *
 * No rounding mode is ever switched (fesetround would be slow, and the compiler may move or
 * fold arithmetic across it): each operation is computed to nearest, with its exact error
 * (error-free transformations: TwoSum, an fma residual, a product of floats being exact in
 * double), and the nearest result is moved one step when the mode and the error's sign say so.
 */
#ifndef HIP_CPU_ROUNDING_H
#define HIP_CPU_ROUNDING_H

namespace hipcpu {
enum rounding { rn, rz, ru, rd };

/* The value of mode m for an exact result x = nearest + (something of sign `side`, smaller
 * than half an ulp of nearest: side > 0 when x is above nearest). */
template <class T> static inline T directed(T nearest, int side, rounding m) {
    if (side == 0 || m == rn || nearest != nearest) return nearest;
    bool above = side > 0;  // x > nearest
    T inf = std::numeric_limits<T>::infinity();
    if (m == ru) return above ? std::nextafter(nearest, inf) : nearest;
    if (m == rd) return above ? nearest : std::nextafter(nearest, -inf);
    // rz: toward zero from x, whose sign is nearest's (or, when nearest is 0, the side's)
    bool positive = nearest > 0 || (nearest == 0 && above);
    if (positive) return above ? nearest : std::nextafter(nearest, (T)0);
    return above ? std::nextafter(nearest, (T)0) : nearest;
}
/* A float result from its double approximation d, whose error from the exact value is err
 * (x = d + err exactly, err tiny next to d): the float nearest to x, moved by mode m. */
static inline float narrowed(double d, double err, rounding m) {
    float c = (float)d;
    if (m == rn) {  // d rounded once already: only a d exactly between two floats misleads
        if ((double)c == d || err == 0) return c;
        float n = std::nextafter(c, d > (double)c ? INFINITY : -INFINITY);
        bool midway = ((double)c + (double)n) * 0.5 == d;
        return midway && ((err > 0) == (n > c)) ? n : c;
    }
    int side = (double)c < d ? 1 : (double)c > d ? -1 : (err > 0) - (err < 0);  // sign(x - c)
    return directed(c, side, m);
}
static inline double two_sum_error(double a, double b, double s) {
    double bb = s - a;
    return (a - (s - bb)) + (b - bb);
}
static inline float f_add(float a, float b, rounding m) {
    double s = (double)a + (double)b;
    return narrowed(s, two_sum_error(a, b, s), m);
}
static inline float f_mul(float a, float b, rounding m) {
    return narrowed((double)a * (double)b, 0.0, m);  // exact: 24 + 24 bits
}
static inline float f_div(float a, float b, rounding m) {
    double q = (double)a / (double)b;
    double r = std::fma(-q, (double)b, (double)a);  // a - q b, exact: sign of x - q times b's
    return narrowed(q, b < 0 ? -r : r, m);
}
static inline float f_sqrt(float a, rounding m) {
    double r = std::sqrt((double)a);
    return narrowed(r, std::fma(-r, r, (double)a), m);
}
static inline float f_fma(float a, float b, float c, rounding m) {
    double p = (double)a * (double)b, s = p + (double)c;
    return narrowed(s, two_sum_error(p, c, s), m);
}
static inline double d_add(double a, double b, rounding m) {
    double s = a + b, e = two_sum_error(a, b, s);
    return directed(s, (e > 0) - (e < 0), m);
}
static inline double d_mul(double a, double b, rounding m) {
    double p = a * b, e = std::fma(a, b, -p);
    return directed(p, (e > 0) - (e < 0), m);
}
static inline double d_div(double a, double b, rounding m) {
    double q = a / b, r = std::fma(-q, b, a);
    int side = (r > 0) - (r < 0);
    return directed(q, b < 0 ? -side : side, m);
}
static inline double d_sqrt(double a, rounding m) {
    double r = std::sqrt(a), e = std::fma(-r, r, a);
    return directed(r, (e > 0) - (e < 0), m);
}
static inline double d_fma(double a, double b, double c, rounding m) {
    // The exact a*b+c needs more than double: the product's error (exact) decides a tie only.
    double s = std::fma(a, b, c), p = a * b, pe = std::fma(a, b, -p);
    double rest = two_sum_error(p, c, p + c) + pe + ((p + c) - s);
    return directed(s, (rest > 0) - (rest < 0), m);
}
}  // namespace hipcpu

#define HIPCPU_ROUNDED(MODE)                                                                   \
    static inline float __fadd_##MODE(float a, float b) { return hipcpu::f_add(a, b, hipcpu::MODE); } \
    static inline float __fsub_##MODE(float a, float b) { return hipcpu::f_add(a, -b, hipcpu::MODE); } \
    static inline float __fmul_##MODE(float a, float b) { return hipcpu::f_mul(a, b, hipcpu::MODE); } \
    static inline float __fdiv_##MODE(float a, float b) { return hipcpu::f_div(a, b, hipcpu::MODE); } \
    static inline float __frcp_##MODE(float a) { return hipcpu::f_div(1.0f, a, hipcpu::MODE); }       \
    static inline float __fsqrt_##MODE(float a) { return hipcpu::f_sqrt(a, hipcpu::MODE); }           \
    static inline float __fmaf_##MODE(float a, float b, float c) {                             \
        return hipcpu::f_fma(a, b, c, hipcpu::MODE);                                           \
    }                                                                                          \
    static inline double __dadd_##MODE(double a, double b) { return hipcpu::d_add(a, b, hipcpu::MODE); } \
    static inline double __dsub_##MODE(double a, double b) { return hipcpu::d_add(a, -b, hipcpu::MODE); } \
    static inline double __dmul_##MODE(double a, double b) { return hipcpu::d_mul(a, b, hipcpu::MODE); } \
    static inline double __ddiv_##MODE(double a, double b) { return hipcpu::d_div(a, b, hipcpu::MODE); } \
    static inline double __drcp_##MODE(double a) { return hipcpu::d_div(1.0, a, hipcpu::MODE); }        \
    static inline double __dsqrt_##MODE(double a) { return hipcpu::d_sqrt(a, hipcpu::MODE); }           \
    static inline double __fma_##MODE(double a, double b, double c) {                          \
        return hipcpu::d_fma(a, b, c, hipcpu::MODE);                                           \
    }                                                                                          \
    static inline float __double2float_##MODE(double x) {                                     \
        return hipcpu::narrowed(x, 0.0, hipcpu::MODE);                                         \
    }
HIPCPU_ROUNDED(rz)
HIPCPU_ROUNDED(ru)
HIPCPU_ROUNDED(rd)
#undef HIPCPU_ROUNDED
/* Round to nearest even is the host's own arithmetic. */
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __double2float_rn(double x) { return (float)x; }

/* ---- halves of a double, and functions HIP documents beyond the C library -------------- */
static inline int __double2hiint(double x) { return (int)(hipcpu::bit_cast<unsigned long long>(x) >> 32); }
static inline int __double2loint(double x) { return (int)hipcpu::bit_cast<unsigned long long>(x); }
static inline double __hiloint2double(int hi, int lo) {
    return hipcpu::bit_cast<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}
static inline float norm3df(float a, float b, float c) { return (float)std::sqrt((double)a * a + (double)b * b + (double)c * c); }
static inline double norm3d(double a, double b, double c) { return std::hypot(std::hypot(a, b), c); }
static inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
static inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static inline float norm4df(float a, float b, float c, float d) {
    return (float)std::sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
static inline float rhypotf(float a, float b) { return (float)(1.0 / std::hypot((double)a, (double)b)); }
static inline double rhypot(double a, double b) { return 1.0 / std::hypot(a, b); }
static inline float normf(int n, const float* a) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += (double)a[i] * a[i];
    return (float)std::sqrt(s);
}
static inline float rnormf(int n, const float* a) { return 1.0f / normf(n, a); }
static inline float cyl_bessel_i0f(float x) { return (float)std::cyl_bessel_i(0.0, std::fabs((double)x)); }
static inline float cyl_bessel_i1f(float x) {
    float v = (float)std::cyl_bessel_i(1.0, std::fabs((double)x));
    return x < 0 ? -v : v;
}
static inline double cyl_bessel_i0(double x) { return std::cyl_bessel_i(0.0, std::fabs(x)); }
static inline double cyl_bessel_i1(double x) {
    double v = std::cyl_bessel_i(1.0, std::fabs(x));
    return x < 0 ? -v : v;
}

#endif /* HIP_CPU_ROUNDING_H */
