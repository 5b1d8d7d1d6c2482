"""Several dependent GEMV products as one launch (kernels/gemv_chain.hip): a decode layer's
output product, normed gate/up product with SwiGLU and down product, and the next layer's
normed QKV product, where each reads what the one before wrote.

Launched one by one, each small product pays its own ramp: the multiprocessors idle while the
last blocks of one launch finish and the first of the next start (an H200 profile of a 1B
Llama's token: the o product's 8 MB took 5.8 µs, 0.35 of the copy rate; issue 38). In one
launch, the blocks of a link ask the L2 for their weight rows (which never depend on the
chain) and then wait on a device counter for the link before them, so the weights of the next
product stream in while the last finishes. (That is the design; on the H200 a 1B Llama's
chained decode step measured slower than its separate products, 1189 against 909 µs: the
chain kernel takes 48 registers where the separate ones take 26-32, so 5 blocks stay resident
a multiprocessor instead of 8. LlamaDecoder leaves it off by default: `chain_products`.)

    backend.gemv_chain([
        GemvLink(context, o_weight, x, residual=x),              # x += context @ o_weightᵀ
        GemvLink(x, gate_up, g, norm=mlp_norm, swiglu=True),     # g = swiglu(rmsnorm(x) @ ..)
        GemvLink(g, down, x, residual=x),                        # x += g @ downᵀ
    ], eps=1e-5)

Each link is what `linear(x, weight, residual=, out=)`, `rmsnorm_linear(x, norm, weight,
residual=, out=)` or `rmsnorm_swiglu(x, norm, weight, out=)` computes, with the same results
(the same kernel code runs each product). The chain runs as one launch when the GEMV kernel
takes every link (ops/gemv.py: at most `gemv_rows` rows, 16-byte aligned rows, contiguous x)
with one of its scalar row tiles (the 16-row tile, 3-16 rows of a 16-bit type, is no link of
the chain kernel) and the backend's counters exist (made by the first chain outside a graph
capture; a capture that makes none runs the links one by one, as does a chain the kernel does
not take).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hip_core import capture_in_progress
from hip_runtime.libraries.kernel_structs import GEMV_CHAIN, GEMV_LINKS, StructValues
from hip_runtime.ops.gemv import (
    _COLUMNS,
    _TEAMS,
    _THREADS,
    GEMV_TILES,
    GemvOps,
    gemv_slices,
    gemv_tile,
)
from hip_runtime.ops.plans import address_of
from hip_runtime.tensors.dtypes import FLOAT_TYPES
from hip_runtime.tensors.tensor import DeviceTensor

_CHAIN_ARGS = StructValues(GEMV_CHAIN)
#: GemvChain's per-link fields, in order (the rest: links, rows, eps, counters).
_LINK_FIELDS = ("w", "x", "y", "residual", "norm", "n", "k", "slices", "fusion", "end")
_PLAIN, _NORM, _SWIGLU = 0, 1, 2  # GemvChain.fusion


@dataclass(frozen=True)
class GemvLink:
    """One product of a chain: out = x @ weightᵀ (+ residual), x [..., in], weight [out, in].
    `norm` [in]: x's rows RMS-normalized by it first (rmsnorm_linear). `swiglu`: weight is a
    stacked [2 · inter, in] gate/up weight and out [..., inter] = silu(gate) · up of the normed
    product (rmsnorm_swiglu; needs `norm`, takes no residual). `out` may be `residual` (in
    place) and may be the x of a later link; it must not overlap this link's x, weight or
    norm."""

    x: DeviceTensor
    weight: DeviceTensor
    out: DeviceTensor
    residual: DeviceTensor | None = None
    norm: DeviceTensor | None = None
    swiglu: bool = False


class GemvChainOps(GemvOps):
    """`gemv_chain`: dependent GEMV products in one launch."""

    def gemv_chain(self, links: Sequence[GemvLink], *, eps: float = 1e-6) -> None:
        """Queue `links` in order on the backend's stream, each reading what the links before
        it wrote: one launch per GEMV_LINKS links where the GEMV kernel takes them all (the
        module's doc), else each link as its own op. `eps`: every norm's epsilon. Every
        link is checked (ValueError, TypeError) before anything is queued."""
        if not isinstance(eps, (int, float)) or isinstance(eps, bool):
            raise TypeError(f"gemv_chain: eps must be a real number, not {type(eps).__name__}")
        checked = [self._chain_link(link, i) for i, link in enumerate(links)]
        rows = {x.size // x.shape[-1] for _, x, *_ in checked}
        if len(rows) > 1:
            raise ValueError(f"gemv_chain: the links' x have different row counts {sorted(rows)}")
        for start in range(0, len(checked), GEMV_LINKS):
            part = checked[start : start + GEMV_LINKS]
            if not self._chain_launch(part, float(eps)):
                for link, *_ in part:
                    self._chain_link_alone(link, float(eps))

    # --- private ------------------------------------------------------------------------------

    def _chain_link(
        self, link: GemvLink, i: int
    ) -> tuple[GemvLink, DeviceTensor, DeviceTensor, int, int]:
        """(link, x, weight, n, fusion), checked as the link's own op checks its operands."""
        if not isinstance(link, GemvLink):
            raise TypeError(f"gemv_chain: link {i} is a {type(link).__name__}, not a GemvLink")
        where = f"gemv_chain link {i}"
        if link.swiglu and (link.norm is None or link.residual is not None):
            raise ValueError(f"{where}: a swiglu link needs a norm and takes no residual")
        x, weight, n = self._gemv_operands(
            where, link.x, link.norm, link.weight, link.residual, link.swiglu
        )
        self._output(
            link.out, (*x.shape[:-1], n), x.dtype, inputs=(link.residual,),
            distinct_from=(x, link.norm, weight),
        )  # fmt: skip
        fusion = _SWIGLU if link.swiglu else (_NORM if link.norm is not None else _PLAIN)
        return link, x, weight, n, fusion

    def _chain_link_alone(self, link: GemvLink, eps: float) -> None:
        """One checked link as its own op (the chain's fallback)."""
        if link.swiglu:
            assert link.norm is not None
            self.rmsnorm_swiglu(link.x, link.norm, link.weight, eps=eps, out=link.out)
        elif link.norm is not None:
            self.rmsnorm_linear(
                link.x, link.norm, link.weight, eps=eps, residual=link.residual, out=link.out
            )
        else:
            self.linear(link.x, link.weight, residual=link.residual, out=link.out)

    def _chain_launch(
        self, links: list[tuple[GemvLink, DeviceTensor, DeviceTensor, int, int]], eps: float
    ) -> bool:
        """Queue checked links as one launch; False (nothing queued) where the kernel does not
        take them all, or there are no counters."""
        x0 = links[0][1]
        if any(
            x.dtype != x0.dtype
            or not self._gemv_takes(x, w, link.norm)
            or link.out._strides is not None
            or (link.residual is not None and link.residual._strides is not None)
            for link, x, w, _, _ in links
        ):
            return False
        rows = x0.size // x0.shape[-1]
        tile = gemv_tile(rows, x0.dtype.itemsize)
        if tile not in GEMV_TILES:  # (the 16-row tile is not a link of the chain kernel)
            return False
        counters = self._gemv_chain_counters()
        if counters is None:
            return False
        columns, sms = _COLUMNS[tile], self.device.properties.multiprocessors
        fields: dict[str, list[int]] = {name: [] for name in _LINK_FIELDS}
        end = 0
        for link, x, weight, n, fusion in links:
            k = x.shape[-1]
            slices = gemv_slices(n, k, x.dtype.itemsize, columns, sms)
            end += -(-n // (_TEAMS // slices * columns))
            for name, value in zip(
                _LINK_FIELDS,
                (weight.ptr, x.ptr, link.out.ptr, address_of(link.residual),
                 address_of(link.norm), n, k, slices, fusion, end),
                strict=True,
            ):  # fmt: skip
                fields[name].append(value)
        for name, values in fields.items():  # unused links: empty, ending where the last did
            values += [values[-1] if name == "end" else 0] * (GEMV_LINKS - len(values))
        args = _CHAIN_ARGS(
            *(v for name in _LINK_FIELDS for v in fields[name]),
            len(links), rows, eps, counters.ptr,
        )  # fmt: skip
        name = f"gemv_chain_r{tile}_{FLOAT_TYPES[x0.dtype].suffix}"
        self._kernel("gemv_chain.hip", name).launch(end, _THREADS, args, stream=self.stream)
        return True

    def _gemv_chain_counters(self) -> DeviceTensor | None:
        """The chain's counters (2 · GEMV_LINKS uint32): zeroed once, left at zero by every
        launch, kept as long as the backend (a captured graph replays with them). None when
        there are none yet and a capture is in progress (their zeroing would be captured)."""
        counters: DeviceTensor | None = getattr(self, "_gemv_chain_counter_buffer", None)
        if counters is None and not capture_in_progress():
            counters = self.zeros((2 * GEMV_LINKS,), np.uint32)  # type: ignore[attr-defined]
            self._gemv_chain_counter_buffer = counters
        return counters


__all__ = ["GemvChainOps", "GemvLink"]
