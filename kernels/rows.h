// How the row kernels (norms, softmax) spread one row over a block.
//
// One block handles one row: block (x, y) of the grid takes row y * gridDim.x + x, so the
// launch is grid = rows (or (g, ceil(rows / g)) beyond the grid's x limit); surplus blocks
// return at once. (A grid-stride loop over rows would let any grid work, but the compilers then
// keep per-thread addresses live across iterations: +30-60 registers, spills on AMD.)
//
// The row is read as "vectors" of N consecutive elements: N = 16 bytes / sizeof(T) when every
// pointer is 16-byte aligned and cols % N == 0, else N = 1 (coalesced scalar reads). Vector j of
// the row belongs to thread j % blockDim.x, so neighbouring threads touch neighbouring memory.
//
// Rows of up to HIPK_ROW_FLOATS * blockDim.x elements (HIPK_SCALAR_ROW_FLOATS for scalar
// rows, whose per-element addresses cost more registers) are kept in registers (RowTile): read
// from memory once and written once, with exact two-pass statistics over the registers. Longer
// rows are streamed: one read for the statistics, a second read for the output.
#pragma once

#include "common.h"

// Floats of a row each thread keeps in registers: 8192 columns at 256 threads per block.
// Together with the streaming path this stays under 64 registers per thread (NVIDIA sm_90) and
// 72 VGPRs (AMD gfx90a), without spills.
#define HIPK_ROW_FLOATS 32
#define HIPK_SCALAR_ROW_FLOATS 8

namespace hipk {

// The row layout a block uses for rows of `cols` elements whose pointers are all in `ptrs`
// (nulls allowed: an absent weight or bias does not constrain the layout).
template <typename T>
HIPK_DEVICE bool row_vectorizable(int cols, const void* a, const void* b, const void* c,
                                  const void* d) {
    const int n = Lanes16<T>::value;
    return cols % n == 0 && aligned(a, 16) && aligned(b, 16) && aligned(c, 16) && aligned(d, 16);
}

// The row this block handles (see above); >= rows for a surplus block.
HIPK_DEVICE long long block_row() { return (long long)blockIdx.y * gridDim.x + blockIdx.x; }

// The vector index of this thread's item k.
HIPK_DEVICE int row_vector(int k) { return k * (int)blockDim.x + (int)threadIdx.x; }

// A row held in registers: ITEMS vectors of N floats per thread (ITEMS * N == HIPK_ROW_FLOATS).
// Every loop has a compile-time trip count and is unrolled, so `v` stays in registers.
template <typename T, int N, int ITEMS> struct RowTile {
    float v[ITEMS][N];

    // Load the row; slots past its end get `fill` (the identity of the reduction that follows).
    HIPK_DEVICE void load(const T* row, int cols, float fill) {
        const int vectors = cols / N;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            const int j = row_vector(k);
            if (j < vectors) {
                load_floats<T, N>(row + (long long)j * N, v[k]);
            } else {
                HIPK_UNROLL
                for (int i = 0; i < N; ++i) v[k][i] = fill;
            }
        }
    }

    // True when item k holds real row elements.
    HIPK_DEVICE static bool valid(int k, int cols) { return row_vector(k) < cols / N; }
};

// Runs the fitting path of a row kernel `op`, which provides
//   template <int N, int ITEMS> void regs() const;   // the row in registers
//   template <int N> void stream() const;            // a row too long for them
// `vectors`: the row's pointers allow N = Lanes16<T> (row_vectorizable).
template <typename T, typename RowOp>
HIPK_DEVICE void run_row(const RowOp& op, int cols, bool vectors) {
    const int N = Lanes16<T>::value;
    const int threads = (int)blockDim.x;
    if (vectors && cols <= HIPK_ROW_FLOATS * threads)
        op.template regs<N, HIPK_ROW_FLOATS / N>();
    else if (!vectors && cols <= HIPK_SCALAR_ROW_FLOATS * threads)
        op.template regs<1, HIPK_SCALAR_ROW_FLOATS>();
    else if (vectors)
        op.template stream<N>();
    else
        op.template stream<1>();
}

}  // namespace hipk
