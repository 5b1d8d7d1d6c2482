"""The GEMMs of the portable convolutions, planned on the host once per geometry (cached).

A forward convolution is im2col + GEMM per chunk of the batch: NCHW Y[n, g] = W[g] @ col[n, g]
(strided-batched over the images, or over the groups when they are more), NHWC Y[:, g] =
col[g] @ W[g]ᵀ (all groups one strided batch, written into Y's column block through ldc); a
1x1 stride-1 unpadded one reads x itself as its columns. A transposed one is the GEMM into
columns (NCHW col[n, g] = W[g]ᵀ @ x[n, g], NHWC col[g] = x[:, g] @ W[g]) and col2im. Chunks
keep the columns within `col_bytes`. Offsets are bytes, strides elements
(hip_runtime.libraries.blas). A plan depends only on its arguments, so a repeated call costs a
dictionary look-up (and each Gemm's column-major form is worked out once).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hip_runtime.libraries.blas import Gemm
from hip_runtime.ops.conv_geometry import ConvGeometry


@dataclass(frozen=True)
class Chunk:
    """One chunk of the batch: images [n0, n0 + nb), `col` column elements from the pool (0:
    none, x is read in place), and the GEMM: `spec` at the operands plus each `offsets` entry."""

    n0: int
    nb: int
    col: int
    spec: Gemm
    offsets: tuple[tuple[int, int, int], ...]


def direct(g: ConvGeometry) -> bool:
    """Whether x itself is the forward GEMM's column matrix (1x1, stride 1, no padding)."""
    return g.r == g.s == 1 and g.stride == (1, 1) and g.padding == (0, 0)


@functools.lru_cache(maxsize=512)
def forward_chunks(g: ConvGeometry, size: int, col_bytes: int) -> tuple[Chunk, ...]:
    """The forward convolution's chunks (`size`: bytes per element)."""
    G = g.groups
    cg, kg, p = g.c // G, g.k // G, g.ho * g.wo
    rsc = cg * g.r * g.s
    in_place = direct(g)
    per_image = g.c * g.r * g.s * p
    chunk = g.n if in_place else max(1, min(g.n, col_bytes // max(per_image * size, 1)))
    found = []
    for n0 in range(0, g.n, chunk):
        nb = min(chunk, g.n - n0)
        offsets: tuple[tuple[int, int, int], ...] = ((0, 0, 0),)
        if g.channels_last:
            spec = Gemm(nb * p, kg, rsc, G, transpose_b=True,
                        stride_a=cg if in_place else nb * p * rsc, stride_b=kg * rsc,
                        stride_c=kg, lda=g.c if in_place else 0, ldc=g.k)  # fmt: skip
        else:
            col_image = per_image  # (x's image when in place: the same count)
            col_group = col_image // G
            if nb >= G:
                spec = Gemm(kg, p, rsc, nb, stride_a=0, stride_b=col_image, stride_c=g.k * p)
                offsets = tuple((i * kg * rsc * size, i * col_group * size, i * kg * p * size)
                                for i in range(G))  # fmt: skip
            else:
                spec = Gemm(kg, p, rsc, G, stride_a=kg * rsc, stride_b=col_group, stride_c=kg * p)
                offsets = tuple((0, j * col_image * size, j * g.k * p * size) for j in range(nb))
        found.append(Chunk(n0, nb, 0 if in_place else nb * per_image, spec, offsets))
    return tuple(found)


@functools.lru_cache(maxsize=512)
def transpose_chunks(g: ConvGeometry, size: int, col_bytes: int) -> tuple[Chunk, ...]:
    """The transposed convolution's chunks; g is the forward convolution of its output to its
    input (conv_geometry.ConvGeometry)."""
    G = g.groups
    cing, coutg, hw = g.k // G, g.c // G, g.ho * g.wo
    rso = coutg * g.r * g.s
    per_image = g.c * g.r * g.s * hw
    chunk = max(1, min(g.n, col_bytes // max(per_image * size, 1)))
    found = []
    for n0 in range(0, g.n, chunk):
        nb = min(chunk, g.n - n0)
        offsets: tuple[tuple[int, int, int], ...] = ((0, 0, 0),)
        if g.channels_last:
            spec = Gemm(nb * hw, rso, cing, G, stride_a=cing, stride_b=cing * rso,
                        stride_c=nb * hw * rso, lda=g.k)  # fmt: skip
        elif nb >= G:
            spec = Gemm(rso, hw, cing, nb, transpose_a=True, stride_a=0,
                        stride_b=g.k * hw, stride_c=G * rso * hw)  # fmt: skip
            offsets = tuple((i * cing * rso * size, i * cing * hw * size, i * rso * hw * size)
                            for i in range(G))  # fmt: skip
        else:
            spec = Gemm(rso, hw, cing, G, transpose_a=True, stride_a=cing * rso,
                        stride_b=cing * hw, stride_c=rso * hw)  # fmt: skip
            offsets = tuple((0, j * g.k * hw * size, j * G * rso * hw * size) for j in range(nb))
        found.append(Chunk(n0, nb, nb * per_image, spec, offsets))
    return tuple(found)


__all__ = ["Chunk", "direct", "forward_chunks", "transpose_chunks"]
