"""cuDNN's backend (graph) API under the surface's convolutions: a plan made once, then one
cudnnBackendExecute per call.

Why: cuDNN 9's legacy cudnnConvolutionForward costs 90-150 us of host time on every call
(H100, cuDNN 9.19: a 1x1 convolution of 64 channels over 8x8 pixels, enqueue only, 1000
calls), where torch's whole F.conv2d, which keeps cudnn-frontend's plans, costs 17-25 us: every
convolution shorter than that ran at the host's pace (bench_conv: 0.12-0.5 of torch on
ResNet-50's 1x1 and 3x3 layers whose kernels were as fast as torch's). Here the operation
graph, the engine heuristics and the execution plan are made once per problem (and per
alignment of the addresses), a variant pack once per set of addresses; a repeated call is one
execute.

The engine is the first of cuDNN's mode-A heuristics (cudnn-frontend's default) whose plan
finalizes within the workspace the call is given. Which problems come here is the caller's
choice (platforms/nvidia/dnn.py `graph_eligible`); a problem no engine takes answers None and
the caller runs the legacy call. Every descriptor made is destroyed by `close()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hip_ffi import dnn_constants as dc
from hip_ffi._ffi import ffi
from hip_ffi.dnn_descriptors import ConvDesc, TensorDesc
from hip_ffi.platforms.nvidia import dnn_tables as t

#: Variant packs one problem keeps (sets of addresses); more: all are dropped and made again.
PACKS = 64
#: The uids of x, w and y in the graphs and the variant packs.
_UIDS = (1, 2, 3)
#: Plan workspace that GetWorkSpaceSize asks about when no call has said its limit.
UNLIMITED = 1 << 62


class GraphFailed(Exception):
    """A backend call failed while making a plan (status: the cudnnStatus_t)."""

    def __init__(self, status: int, call: str) -> None:
        super().__init__(f"{call}: cudnnStatus {status}")
        self.status = status


def unscaled(alpha: Any, beta: Any) -> bool:
    """alpha 1 and beta 0 (float, as for 16-bit data): what the graph plans are made for."""
    try:  # a float* (hip_runtime's) reads as it is: a cast costs more than the rest of a call
        return bool(alpha[0] == 1.0 and beta[0] == 0.0)
    except TypeError:  # a void*
        return bool(ffi.cast("float*", alpha)[0] == 1.0 and ffi.cast("float*", beta)[0] == 0.0)


def alignment(pointer: Any) -> int:
    """The largest power of two up to 16 that divides the address (16 for NULL)."""
    address = int(ffi.cast("uintptr_t", pointer))
    return min(address & -address, 16) if address else 16


class GraphConvolution:
    """The graph-API plans of one convolution problem on one handle.

    direction: dnn_tables.GRAPH_OPERATIONS's key ("fwd" / "bwd"); x, w, y: the forward
    convolution's tensors (backward data writes x from y); data_type: cuDNN's of all three."""

    def __init__(
        self, cudnn: Any, handle: Any, direction: str, data_type: int,
        tensors: Sequence[TensorDesc], conv: ConvDesc,
    ) -> None:  # fmt: skip
        self.cudnn, self.handle = cudnn, handle
        self._execute = cudnn.cudnnBackendExecute
        self.operation = t.GRAPH_OPERATIONS[direction]
        self.data_type = data_type
        self.shapes = [(d.dims, d.strides) for d in tensors]
        self.conv = (conv.pads, conv.strides, conv.dilations)
        self._owned: list[Any] = []  # every backend descriptor made here
        #: alignments -> (the heuristics' engine configs, (plan or None, workspace bytes) of
        #: those finalized so far)
        self._searches: dict[tuple[int, ...], tuple[list[Any], list[tuple[Any, int]]]] = {}
        #: (x, w, y, workspace, its bytes) -> (plan, variant pack)
        self._packs: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def execute(self, x: Any, w: Any, y: Any, workspace: Any, size: int) -> int | None:
        """Queue the convolution on the handle's stream: cuDNN's status, or None when no
        engine takes it within `size` bytes of workspace (nothing queued)."""
        found = self._packs.get((x, w, y, workspace, size))
        if found is None:
            found = self._pack(x, w, y, workspace, size)
            if found is None:
                return None
        status: int = self._execute(self.handle, found[0], found[1])
        return status

    def needs(self, pointers: Sequence[Any], limit: int) -> int:
        """Bytes of workspace the plan for these addresses takes within `limit` (0 if none)."""
        aligned = (alignment(pointers[0]), alignment(pointers[1]), alignment(pointers[2]))
        return self.workspace(aligned, limit) or 0

    def workspace(self, alignments: tuple[int, int, int], limit: int) -> int | None:
        """Bytes of workspace the plan for these address alignments takes within `limit`;
        None when no engine does."""
        found = self.plan(alignments, limit)
        return None if found is None else found[1]

    def plan(self, alignments: tuple[int, int, int], limit: int) -> tuple[Any, int] | None:
        """(execution plan, workspace bytes) of the first heuristic engine that finalizes
        within `limit` bytes. The graph and its heuristics are made once per alignments, each
        engine's plan once, in the heuristics' order, as far as a call's limit needs."""
        search = self._searches.get(alignments)
        if search is None:
            search = self._searches[alignments] = (self._configs(alignments), [])
        configs, tried = search
        for i, config in enumerate(configs):
            if i == len(tried):
                tried.append(self._finalized(config))
            plan, size = tried[i]
            if plan is not None and size <= limit:
                return plan, size
        return None

    def close(self) -> None:
        """Destroy every descriptor (plans, packs, the graph): once the handle's work that
        uses them is queued, cuDNN needs them no more."""
        for descriptor in reversed(self._owned):
            self.cudnn.cudnnBackendDestroyDescriptor(descriptor)
        self._owned.clear()
        self._searches.clear()
        self._packs.clear()

    # --- making the descriptors ----------------------------------------------------------------

    def _pack(self, x: Any, w: Any, y: Any, workspace: Any, size: int) -> tuple[Any, Any] | None:
        aligned = (alignment(x), alignment(w), alignment(y))
        found = self.plan(aligned, size)
        if found is None:
            return None
        if len(self._packs) >= PACKS:
            self._drop_packs()
        pack = self._made(
            t.BACKEND_VARIANT_PACK,
            (t.ATTR_VARIANT_PACK_UNIQUE_IDS, t.TYPE_INT64, ffi.new("int64_t[]", _UIDS)),
            (t.ATTR_VARIANT_PACK_DATA_POINTERS, t.TYPE_VOID_PTR, ffi.new("void*[]", [x, w, y])),
            (t.ATTR_VARIANT_PACK_WORKSPACE, t.TYPE_VOID_PTR, ffi.new("void*[]", [workspace])),
        )
        entry = (found[0], pack)
        self._packs[(x, w, y, workspace, size)] = entry
        return entry

    def _drop_packs(self) -> None:
        packs = {id(pack) for _, pack in self._packs.values()}
        for pack in [d for d in self._owned if id(d) in packs]:
            self.cudnn.cudnnBackendDestroyDescriptor(pack)
            self._owned.remove(pack)
        self._packs.clear()

    def _configs(self, alignments: tuple[int, int, int]) -> list[Any]:
        """The engine configs cuDNN's mode-A heuristics rank for the graph, best first; none
        when a backend call fails making them (the legacy call then runs the problem)."""
        cudnn, count = self.cudnn, ffi.new("int64_t*")
        try:
            graph = self._graph(alignments)
            heuristics = self._made(
                t.BACKEND_ENGINEHEUR,
                (t.ATTR_ENGINEHEUR_OPERATION_GRAPH, t.TYPE_BACKEND_DESCRIPTOR, _list(graph)),
                (t.ATTR_ENGINEHEUR_MODE, t.TYPE_HEUR_MODE, ffi.new("int[]", [t.HEUR_MODE_A])),
            )
            results = (heuristics, t.ATTR_ENGINEHEUR_RESULTS, t.TYPE_BACKEND_DESCRIPTOR)
            _check(cudnn.cudnnBackendGetAttribute(*results, 0, count, ffi.NULL), "heuristics")
            configs = [self._created(t.BACKEND_ENGINECFG) for _ in range(count[0])]
            if configs:
                status = cudnn.cudnnBackendGetAttribute(*results, len(configs), count,
                                                        _list(*configs))  # fmt: skip
                _check(status, "heuristics")
        except GraphFailed:
            return []
        return configs[: count[0]]

    def _finalized(self, config: Any) -> tuple[Any, int]:
        """(the config's execution plan, its workspace bytes); (None, 0) when it does not
        finalize here."""
        cudnn = self.cudnn
        try:
            plan = self._created(t.BACKEND_EXECUTION_PLAN)
        except GraphFailed:
            return None, 0
        size, count = ffi.new("int64_t[]", 1), ffi.new("int64_t*")
        handle = ffi.new("cudnnHandle_t[]", [self.handle])
        config_attribute = (t.ATTR_EXECUTION_PLAN_ENGINE_CONFIG, t.TYPE_BACKEND_DESCRIPTOR)
        failed = (
            cudnn.cudnnBackendSetAttribute(plan, *config_attribute, 1, _list(config))
            or cudnn.cudnnBackendSetAttribute(plan, t.ATTR_EXECUTION_PLAN_HANDLE,
                                              t.TYPE_HANDLE, 1, handle)
            or cudnn.cudnnBackendFinalize(plan)
            or cudnn.cudnnBackendGetAttribute(plan, t.ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              t.TYPE_INT64, 1, count, size)
        )  # fmt: skip
        return (None, 0) if failed else (plan, int(size[0]))

    def _graph(self, alignments: tuple[int, int, int]) -> Any:
        op = self.operation
        handle = ffi.new("cudnnHandle_t[]", [self.handle])
        tensors = [
            self._made(
                t.BACKEND_TENSOR,
                (t.ATTR_TENSOR_DATA_TYPE, t.TYPE_DATA_TYPE, ffi.new("int[]", [self.data_type])),
                (t.ATTR_TENSOR_DIMENSIONS, t.TYPE_INT64, ffi.new("int64_t[]", dims)),
                (t.ATTR_TENSOR_STRIDES, t.TYPE_INT64, ffi.new("int64_t[]", strides)),
                (t.ATTR_TENSOR_UNIQUE_ID, t.TYPE_INT64, ffi.new("int64_t[]", [uid])),
                (t.ATTR_TENSOR_BYTE_ALIGNMENT, t.TYPE_INT64, ffi.new("int64_t[]", [aligned])),
            )
            for (dims, strides), uid, aligned in zip(self.shapes, _UIDS, alignments, strict=True)
        ]
        pads, strides, dilations = self.conv
        spatial = len(pads)
        conv = self._made(
            t.BACKEND_CONVOLUTION,
            (t.ATTR_CONVOLUTION_COMP_TYPE, t.TYPE_DATA_TYPE,
             ffi.new("int[]", [t.CUDNN_DATA_FLOAT])),
            (t.ATTR_CONVOLUTION_CONV_MODE, t.TYPE_CONVOLUTION_MODE,
             ffi.new("int[]", [t.CUDNN_CROSS_CORRELATION])),
            (t.ATTR_CONVOLUTION_SPATIAL_DIMS, t.TYPE_INT64, ffi.new("int64_t[]", [spatial])),
            (t.ATTR_CONVOLUTION_DILATIONS, t.TYPE_INT64, ffi.new("int64_t[]", dilations)),
            (t.ATTR_CONVOLUTION_FILTER_STRIDES, t.TYPE_INT64, ffi.new("int64_t[]", strides)),
            (t.ATTR_CONVOLUTION_PRE_PADDINGS, t.TYPE_INT64, ffi.new("int64_t[]", pads)),
            (t.ATTR_CONVOLUTION_POST_PADDINGS, t.TYPE_INT64, ffi.new("int64_t[]", pads)),
        )  # fmt: skip
        x, w, y = tensors
        operation = self._made(
            op.descriptor,
            (op.x, t.TYPE_BACKEND_DESCRIPTOR, _list(x)),
            (op.w, t.TYPE_BACKEND_DESCRIPTOR, _list(w)),
            (op.y, t.TYPE_BACKEND_DESCRIPTOR, _list(y)),
            (op.conv, t.TYPE_BACKEND_DESCRIPTOR, _list(conv)),
            (op.alpha, t.TYPE_FLOAT, ffi.new("float[]", [1.0])),
            (op.beta, t.TYPE_FLOAT, ffi.new("float[]", [0.0])),
        )
        return self._made(
            t.BACKEND_OPERATIONGRAPH,
            (t.ATTR_OPERATIONGRAPH_OPS, t.TYPE_BACKEND_DESCRIPTOR, _list(operation)),
            (t.ATTR_OPERATIONGRAPH_HANDLE, t.TYPE_HANDLE, handle),
        )

    def _created(self, kind: int) -> Any:
        out = ffi.new("cudnnBackendDescriptor_t*")
        _check(self.cudnn.cudnnBackendCreateDescriptor(kind, out), "cudnnBackendCreateDescriptor")
        self._owned.append(out[0])
        return out[0]

    def _made(self, kind: int, *attributes: tuple[int, int, Any]) -> Any:
        """A finalized descriptor of `kind` with `attributes` (name, type, cffi array)."""
        descriptor = self._created(kind)
        for name, kind_of_value, values in attributes:
            count = len(values)
            status = self.cudnn.cudnnBackendSetAttribute(descriptor, name, kind_of_value, count,
                                                         values)  # fmt: skip
            _check(status, f"cudnnBackendSetAttribute({name})")
        _check(self.cudnn.cudnnBackendFinalize(descriptor), f"cudnnBackendFinalize({kind})")
        return descriptor


class Graphs:
    """A surface's GraphConvolutions, by handle and problem, for the problems this path takes:
    4-D f16 / bf16 tensors, one group, cross-correlation (f32 stays on the legacy calls, whose
    FMA math type keeps it off TF32 tensor cores; grouped problems too). `enabled` False: none."""

    def __init__(self, cudnn: Any, enabled: bool) -> None:
        self.cudnn, self.enabled = cudnn, enabled
        self._by_problem: dict[tuple[Any, ...], GraphConvolution] = {}

    def get(
        self, handle: Any, direction: str, tensors: Sequence[TensorDesc], conv: ConvDesc
    ) -> GraphConvolution | None:
        """The problem's GraphConvolution (made on first use), or None when it is not one this
        path takes."""
        x = tensors[0]
        if not (
            self.enabled and x.data_type in _SIXTEEN_BIT and conv.groups == 1
            and conv.mode == dc.MIOPEN_CONVOLUTION and all(len(d.dims) == 4 for d in tensors)
        ):  # fmt: skip
            return None
        key = (handle, direction, tuple((d.data_type, d.dims, d.strides) for d in tensors),
               conv.pads, conv.strides, conv.dilations)  # fmt: skip
        found = self._by_problem.get(key)
        if found is None:
            found = GraphConvolution(self.cudnn, handle, direction, t.DATA_TYPE[x.data_type],
                                     tensors, conv)  # fmt: skip
            self._by_problem[key] = found
        return found

    def close(self, handle: Any) -> None:
        """Destroy the plans made on `handle` (before the handle itself)."""
        for key in [k for k in self._by_problem if k[0] == handle]:
            self._by_problem.pop(key).close()


_SIXTEEN_BIT = frozenset({dc.MIOPEN_HALF, dc.MIOPEN_BFLOAT16})


def _list(*descriptors: Any) -> Any:
    return ffi.new("cudnnBackendDescriptor_t[]", list(descriptors))


def _check(status: int, call: str) -> None:
    if status:
        raise GraphFailed(status, call)


__all__ = [
    "PACKS", "UNLIMITED", "GraphConvolution", "GraphFailed", "Graphs", "alignment", "unscaled",
]  # fmt: skip
