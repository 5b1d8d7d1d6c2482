// Every element type a DeviceTensor holds, for kernels generated per type by macro, and the
// type each computes in.
//
//   HIPK_FLOAT_TYPES(X)  X(f32, float) X(f64, double) X(f16, hipk::f16) X(bf16, hipk::bf16)
//   HIPK_INT_TYPES(X)    X(i8, signed char) ... X(u32, unsigned int)
//   HIPK_BOOL_TYPE(X)    X(b8, bool)
//
// The suffixes are hip_runtime.tensors.dtypes.suffix()'s, so the host finds `add_bf16` by name. A
// line of its own `HIPK_FLOAT_TYPES(NAME)` at file scope, with `#define NAME(S, T) ...`
// defining one entry point, is written out per type by hip_runtime.libraries.kernel_sources
// before any compiler sees it (hip-core reads parameter types from the text, before
// preprocessing): so entry points' scalar parameters must be plain C types (float, double,
// long long...), never T itself (a 16-bit float travels behind a pointer only).
//
// Compute<T>::type is what arithmetic on T happens in: f32 for the 16-bit floats (loads widen,
// stores round to nearest even once), the type itself otherwise (f64 in f64, integers in
// their own type, wrapping as C does for unsigned and as two's complement for signed).
#pragma once

#include "common.h"

#define HIPK_FLOAT_TYPES(X) X(f32, float) X(f64, double) X(f16, hipk::f16) X(bf16, hipk::bf16)
#define HIPK_INT_TYPES(X)                                                                      \
    X(i8, signed char) X(i16, short) X(i32, int) X(i64, long long) X(u8, unsigned char)        \
    X(u32, unsigned int)
#define HIPK_BOOL_TYPE(X) X(b8, bool)
// The types of kernels that compute in f32 whatever they store (attention, the row ops).
#define HIPK_F32_AND_16BIT_TYPES(X) X(f32, float) X(f16, hipk::f16) X(bf16, hipk::bf16)
#define HIPK_ALL_TYPES(X) HIPK_FLOAT_TYPES(X) HIPK_INT_TYPES(X) HIPK_BOOL_TYPE(X)

namespace hipk {

template <typename T> struct Compute { typedef T type; };
template <> struct Compute<f16> { typedef float type; };
template <> struct Compute<bf16> { typedef float type; };

// An element as its compute type, and back (rounding once for the 16-bit floats).
template <typename T> HIPK_DEVICE typename Compute<T>::type load_value(T x) { return x; }
template <> HIPK_DEVICE float load_value<f16>(f16 x) { return to_float(x); }
template <> HIPK_DEVICE float load_value<bf16>(bf16 x) { return to_float(x); }
template <typename T> HIPK_DEVICE T store_value(typename Compute<T>::type x) { return (T)x; }
template <> HIPK_DEVICE f16 store_value<f16>(float x) { return from_float<f16>(x); }
template <> HIPK_DEVICE bf16 store_value<bf16>(float x) { return from_float<bf16>(x); }

}  // namespace hipk
