"""Sharded loading: where each tensor of a checkpoint goes on several devices, and the reads
that take it there with the file read once.

    runtime = ModelRuntime.load("model/", devices=[0, 1], shard={
        "*.self_attn.[qkv]_proj.weight": "column",   # output features split: rows of [out, in]
        "*.self_attn.o_proj.weight": "row",          # input features split: columns of [out, in]
        "*.mlp.gate_proj.weight": "column", "*.mlp.up_proj.weight": "column",
        "*.mlp.down_proj.weight": "row",
        "lm_head.weight": 0,                         # whole, on device 0 only
    })
    runtime.shards[1]["model.layers.0.mlp.up_proj.weight"]   # device 1's half

`shard` maps name patterns (`fnmatch`: `*`, `?`, `[...]`; the first pattern in the mapping's
order that matches a name decides) to a rule:

- "column" (or "colwise"): split along axis 0 into equal parts, part k on devices[k]. For a
  Linear weight stored as [out_features, in_features] (torch's layout, and `linear`'s) that is
  a column-parallel layer (each device computes a slice of the outputs); a 1-D bias splits too.
- "row" (or "rowwise"): split along axis 1: a row-parallel layer (each device takes a slice of
  the inputs; the partial outputs are summed with an all-reduce). A 1-D tensor has no axis 1:
  a row-parallel layer's bias is added once after the all-reduce, so replicate it.
- `Split(axis)`: split along any axis (negative counts from the end).
- "replicate": the whole tensor on every device.
- a device (an ordinal of `devices`, or a hip_core.Device): the whole tensor on that device.

Tensors no pattern matches are replicated: in tensor parallelism every device runs every layer,
so what is not split (norms, embeddings, a row-parallel bias) is needed on each one; give big
tensors only one device needs (an LM head used on one rank) a device rule. Bad input is a
ValueError (TypeError for a wrong type) raised before anything is allocated: an axis the tensor
lacks or whose size the device count does not divide, a device not in `devices`, an unknown
rule, a pattern that matches no tensor (a typo would otherwise silently replicate), and a split
of a quantized (GGUF block) tensor, which is not supported: place those whole.

Reading: every tensor's bytes are read from the file once, into pinned staging chunks, and each
device's part is copied from the same chunk on that device's own streams (the copier's, see
`hip_runtime.transfers.staging`). A split along axis 0 (or of rows longer than a chunk) is a
contiguous range per device; a split along a later axis interleaves the devices' parts row by row,
so the read scatters the file's rows in the chunk (one `preadv` over many buffers) to leave each
device's part contiguous there: one copy per device per chunk, no host-side shuffle.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from hip_core import Device, DeviceBuffer, Stream
from hip_runtime.loading.formats import Checkpoint, TensorRecord
from hip_runtime.loading.placement import ChunkPlanner, Placement, file_order
from hip_runtime.tensors.tensor import DeviceTensor
from hip_runtime.transfers.staging import Chunk, Interleaved, Piece


@dataclass(frozen=True)
class Split:
    """A shard rule: split the tensor along `axis` into equal parts, part k on devices[k]."""

    axis: int


ShardRule = str | int | Device | Split
_AXES = {"column": 0, "colwise": 0, "row": 1, "rowwise": 1}
_RULES = "'column', 'row', 'replicate', a device ordinal or Split(axis)"


@dataclass(frozen=True)
class TensorLayout:
    """Where one tensor lives. `targets`: indices into the load's devices. With `axis` None
    each target holds the whole tensor; otherwise targets are every device in order and
    targets[k] holds part k of len(targets) equal parts along `axis`."""

    targets: tuple[int, ...]
    axis: int | None = None

    def part_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape each target holds."""
        if self.axis is None:
            return shape
        parts = list(shape)
        parts[self.axis] //= len(self.targets)
        return tuple(parts)


def resolve_devices(devices: Sequence[Device | int]) -> list[Device]:
    """The load's devices from ordinals or Devices: distinct, existing (ValueError), in order."""
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):
        raise TypeError(f"devices must be a sequence of ordinals or Devices, not {devices!r}")
    if not devices:
        raise ValueError("devices must name at least one device")
    count = Device.count()
    found = []
    for device in devices:
        if isinstance(device, Device):
            found.append(device)
        elif isinstance(device, int) and not isinstance(device, bool):
            if not 0 <= device < count:
                raise ValueError(f"no device {device}: this platform has {count} (0-{count - 1})")
            found.append(Device(device))
        else:
            raise TypeError(f"devices must be ordinals or Devices, not {device!r}")
    ordinals = [d.ordinal for d in found]
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"devices {ordinals} name one device twice")
    return found


def resolve_layouts(
    checkpoint: Checkpoint,
    devices: Sequence[Device],
    shard: Mapping[str, ShardRule] | None,
) -> list[TensorLayout]:
    """Each tensor's layout (in checkpoint order) under `shard`; see the module's docstring."""
    everywhere = TensorLayout(tuple(range(len(devices))))
    if shard is None:
        return [everywhere] * len(checkpoint.tensors)
    if not isinstance(shard, Mapping):
        raise TypeError(f"shard must map name patterns to rules, not {type(shard).__name__}")
    ordinals = [d.ordinal for d in devices]
    rules = [(_pattern(pattern), _rule(pattern, rule, ordinals)) for pattern, rule in shard.items()]
    names = [t.name for t in checkpoint.tensors]
    unmatched = [p for p, _ in rules if not any(fnmatchcase(name, p) for name in names)]
    if unmatched:
        raise ValueError(f"shard patterns {unmatched} match no tensor of the checkpoint")
    layouts = []
    for record in checkpoint.tensors:
        pattern, rule = next(((p, r) for p, r in rules if fnmatchcase(record.name, p)), ("", ""))
        if isinstance(rule, Split):
            axis = _split_axis(record, pattern, rule, len(devices))
            layouts.append(dataclasses.replace(everywhere, axis=axis))
        elif isinstance(rule, int):
            layouts.append(TensorLayout((ordinals.index(rule),)))
        else:  # "replicate", or no pattern matched
            layouts.append(everywhere)
    return layouts


def _pattern(pattern: object) -> str:
    if not isinstance(pattern, str):
        raise TypeError(f"shard's keys are name patterns (str), not {pattern!r}")
    return pattern


def _rule(pattern: str, rule: object, ordinals: list[int]) -> str | int | Split:
    """'replicate', a device ordinal of the load, or a Split (named axes resolved)."""
    if isinstance(rule, str):
        if rule == "replicate":
            return rule
        if rule in _AXES:
            return Split(_AXES[rule])
        raise ValueError(f"shard[{pattern!r}]: unknown rule {rule!r}; rules are {_RULES}")
    if isinstance(rule, Device):
        rule = rule.ordinal
    if isinstance(rule, int) and not isinstance(rule, bool):
        if rule not in ordinals:
            raise ValueError(f"shard[{pattern!r}]: device {rule} is not one of devices {ordinals}")
        return rule
    if isinstance(rule, Split) and isinstance(rule.axis, int) and not isinstance(rule.axis, bool):
        return rule
    raise TypeError(f"shard[{pattern!r}]: {rule!r} is not a rule; rules are {_RULES}")


def _split_axis(record: TensorRecord, pattern: str, rule: Split, parts: int) -> int:
    shape, ndim = record.shape, len(record.shape)
    axis = rule.axis + ndim if rule.axis < 0 else rule.axis
    where = f"shard[{pattern!r}] splits {record.name!r} (shape {shape})"
    if not 0 <= axis < ndim:
        hint = " (a row-parallel layer's bias is added once: replicate it)" if ndim == 1 else ""
        raise ValueError(f"{where} along axis {rule.axis}, which it does not have{hint}")
    if shape[axis] % parts:
        raise ValueError(
            f"{where} along axis {axis}: {shape[axis]} is not divisible by {parts} devices"
        )
    if record.encoding != "raw":
        raise ValueError(f"{where}: {record.encoding} tensors are placed whole, never split")
    return axis


class ShardedPlacement:
    """A load's destination on each device (a `Placement` per device, holding the tensors or
    parts `layouts` gives it) and the staged reads that fill them, the file read once."""

    def __init__(
        self,
        devices: Sequence[Device],
        checkpoint: Checkpoint,
        layouts: Sequence[TensorLayout],
        *,
        arena: bool,
    ) -> None:
        self.checkpoint = checkpoint
        self.layouts = list(layouts)
        records: list[list[TensorRecord]] = [[] for _ in devices]
        self.where: list[list[tuple[int, int]]] = []  # per tensor: (target, index there)
        for record, layout in zip(checkpoint.tensors, self.layouts, strict=True):
            part = record
            if layout.axis is not None:
                nbytes = record.nbytes // len(devices)
                part = dataclasses.replace(record, shape=layout.part_shape(record.shape),
                                           nbytes=nbytes)  # fmt: skip
            self.where.append([(k, len(records[k])) for k in layout.targets])
            for k in layout.targets:
                records[k].append(part)
        self.placements: list[Placement] = []
        try:
            for device, held in zip(devices, records, strict=True):
                part_of = dataclasses.replace(checkpoint, tensors=tuple(held))
                self.placements.append(Placement(device, part_of, arena=arena))
        except BaseException:
            self.release()
            raise

    @property
    def arenas(self) -> list[DeviceBuffer | None]:
        return [p.arena for p in self.placements]

    @property
    def splits(self) -> bool:
        """Whether any tensor is split (its parts' bytes are not in file order in a chunk)."""
        return any(layout.axis is not None for layout in self.layouts)

    def chunks(self, files: Sequence[int], limit: int) -> Iterator[Chunk]:
        """The staged reads, in file order, of chunks of at most `limit` bytes; `files` are the
        open descriptors of the checkpoint's files."""
        descriptor = dict(zip(self.checkpoint.files, files, strict=True))
        planner = ChunkPlanner(limit)
        for index in file_order(self.checkpoint):
            record, layout = self.checkpoint.tensors[index], self.layouts[index]
            fd, places = descriptor[record.path], self.where[index]
            addresses = [(k, self.placements[k].raw_at[i]) for k, i in places]
            if layout.axis is None:
                yield from planner.span(fd, record.offset, record.nbytes, addresses, key=index)
                continue
            outer = math.prod(record.shape[: layout.axis])
            row = record.nbytes // outer  # one index of the leading axes, all devices' parts
            if outer > 1 and row <= limit:
                yield from planner.flush()
                yield from _interleaved(fd, record, index, outer, row, addresses, limit)
                continue
            part = row // len(places)  # contiguous runs: long enough to copy one by one
            for o in range(outer):
                for k, (target, address) in enumerate(addresses):
                    start = o * row + k * part
                    yield from planner.span(fd, record.offset + start, part,
                                            [(target, address + o * part)],
                                            key=index, key_offset=start)  # fmt: skip
        yield from planner.flush()

    def finish(self, streams: Sequence[Stream]) -> list[dict[str, DeviceTensor]]:
        """Each device's tensors (carrying its stream of `streams`), after dequantizing (on
        that device, current while its kernels launch)."""
        shards = []
        for placement, stream in zip(self.placements, streams, strict=True):
            with placement.device:
                shards.append(placement.finish(stream))
        return shards

    def release(self) -> None:
        """Free everything allocated on every device (after the copies into it finished)."""
        for placement in self.placements:
            placement.release()


def _interleaved(
    fd: int,
    record: TensorRecord,
    key: int,
    outer: int,
    row: int,
    addresses: list[tuple[int, int]],
    limit: int,
) -> Iterator[Chunk]:
    """Chunks of whole rows of a tensor split along a later axis: each row holds every
    device's part in turn; the read scatters them so that device k's parts of the chunk's `r`
    rows lie together at k * r * part, and one piece per device copies them."""
    parts = len(addresses)
    part = row // parts
    per_chunk = max(1, limit // row)
    for first in range(0, outer, per_chunk):
        rows = min(per_chunk, outer - first)
        scatter = Interleaved(rows, parts, part)
        pieces = [
            Piece(k * rows * part, address + first * part, rows * part, key, first * row, target)
            for k, (target, address) in enumerate(addresses)
        ]
        yield Chunk(fd, record.offset + first * row, rows * row, pieces, scatter)


__all__ = [
    "ShardRule",
    "ShardedPlacement",
    "Split",
    "TensorLayout",
    "resolve_devices",
    "resolve_layouts",
]
