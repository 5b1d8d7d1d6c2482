"""Launch configurations: a kernel launch's grid, block, dynamic shared memory and stream.

    config = LaunchConfig(grid=(n // 256,), block=256, shared_mem=1024, stream=stream)
    kernel.launch(config, x, n)            # the same as the call below
    kernel.launch(n // 256, 256, x, n, shared_mem=1024, stream=stream)

`Kernel.launch`, `Kernel.prepare` and `Kernel.launch_cooperative` take either form and check
a configuration here, once, before anything reaches the GPU (`resolve`). A LaunchConfig made
once and passed to every launch of a hot loop is checked at its construction only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, final

from hip_core._checks import integer
from hip_core.stream import Stream, checked_handle

Dim3 = int | Sequence[int]
_MAX_DIM = 2**31 - 1
#: The default of a launch's `block`, `shared_mem` and `stream` parameters: "not given" (no
#: value a caller passes is this object), so that a LaunchConfig given with either is refused.
MISSING: Any = object()


def _dim3(value: Dim3, what: str) -> tuple[int, int, int]:
    """1-3 dimensions from an integer or a tuple/list of integers (any integral type)."""
    items: Sequence[Any] = value if isinstance(value, (tuple, list)) else (value,)
    try:
        dims = tuple(integer(d, what) for d in items)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"{what} must be an integer or 1-3 integers, not {value!r}")
    if not all(1 <= d <= _MAX_DIM for d in dims):
        raise ValueError(f"{what} dimensions must be between 1 and {_MAX_DIM}, not {value!r}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


@final
class LaunchConfig:
    """Where and how large one kernel launch is; immutable, checked when made.

    Args:
        grid: blocks per dimension: an integer or 1-3 integers (x, y, z; any integral type
            but bool), each 1 to 2**31 - 1. Stored as (x, y, z), missing dimensions 1.
        block: threads per block, in the same forms. The kernel's own limit on threads per
            block (its MAX_THREADS_PER_BLOCK attribute) is checked at the launch.
        shared_mem: bytes of dynamic shared memory per block (the kernel's `extern
            __shared__` array), an integer >= 0. On NVIDIA, more than 48 KiB needs
            `Kernel.set_max_dynamic_shared_memory` first.
        stream: the Stream the launch is queued on, or None for the current device's null
            stream. The launch is asynchronous: it returns once queued and runs after the
            work queued on that stream before it. Whether the stream is open is checked at
            each launch (ClosedError), not here: a configuration may outlive its stream.

    Bad values raise TypeError (a wrong type: a float, a bool, 4 dimensions, a raw stream
    handle) or ValueError (a dimension out of range, negative shared memory) here. Two
    configurations are equal when their fields are (the stream: the same object). A kernel
    launched with the same LaunchConfig object as its previous launch configures nothing; the
    call itself costs a little more than one with plain integers (the kernel's arguments are
    gathered into a new tuple). `Kernel.prepare` is the cheapest repeated launch.
    """

    __slots__ = ("parts",)

    #: (grid, block, shared_mem, stream), the fields below: one read for a launch to unpack.
    parts: tuple[tuple[int, int, int], tuple[int, int, int], int, Stream | None]

    def __init__(
        self, grid: Dim3, block: Dim3, shared_mem: int = 0, stream: Stream | None = None
    ) -> None:
        dims = _dim3(grid, "grid"), _dim3(block, "block")
        shared = integer(shared_mem, "shared_mem")
        if shared < 0:
            raise ValueError(f"shared_mem must be a byte count >= 0, not {shared_mem!r}")
        if stream is not None:
            checked_handle(stream, check_open=False)  # TypeError for anything but a Stream
        # (the one way in: __setattr__ refuses)
        object.__setattr__(self, "parts", (dims[0], dims[1], shared, stream))

    @property
    def grid(self) -> tuple[int, int, int]:
        """Blocks per dimension, (x, y, z)."""
        return self.parts[0]

    @property
    def block(self) -> tuple[int, int, int]:
        """Threads per block, (x, y, z)."""
        return self.parts[1]

    @property
    def shared_mem(self) -> int:
        """Bytes of dynamic shared memory per block."""
        return self.parts[2]

    @property
    def stream(self) -> Stream | None:
        """The stream launches are queued on (None: the null stream)."""
        return self.parts[3]

    @property
    def threads_per_block(self) -> int:
        """block x * y * z."""
        x, y, z = self.block
        return x * y * z

    def replace(self, **changes: Any) -> LaunchConfig:
        """A copy with some fields changed (`config.replace(stream=other)`), checked anew."""
        fields = dict(zip(("grid", "block", "shared_mem", "stream"), self.parts, strict=True))
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"LaunchConfig has no field {', '.join(sorted(unknown))}")
        return LaunchConfig(**{**fields, **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"LaunchConfig is immutable: use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("LaunchConfig is immutable")

    def _key(self) -> tuple[Any, ...]:
        return (*self.parts[:3], id(self.stream))

    def __eq__(self, other: object) -> bool:
        if type(other) is not LaunchConfig:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"LaunchConfig(grid={self.grid}, block={self.block}, "
            f"shared_mem={self.shared_mem}, stream={self.stream!r})"
        )


def resolve(
    grid: Any, block: Any, args: tuple[Any, ...], shared_mem: Any, stream: Any
) -> tuple[LaunchConfig, tuple[Any, ...]]:
    """(configuration, kernel arguments) of a launch call in either form: `(config, *args)`,
    or `(grid, block, *args, shared_mem=, stream=)`, where `block`, `shared_mem` and `stream`
    are MISSING when not given. TypeError for a LaunchConfig given with `shared_mem=` or
    `stream=` (it has its own) and for a grid without a block."""
    if type(grid) is LaunchConfig:
        if shared_mem is not MISSING or stream is not MISSING:
            raise TypeError(
                "a launch given a LaunchConfig takes shared_mem and stream from it: "
                "use config.replace(...) instead of the keywords"
            )
        return grid, args if block is MISSING else (block, *args)
    if block is MISSING:
        raise TypeError("a launch takes a grid and a block (or one LaunchConfig) first")
    return LaunchConfig(
        grid,
        block,
        0 if shared_mem is MISSING else shared_mem,
        None if stream is MISSING else stream,
    ), args


__all__ = ["Dim3", "LaunchConfig", "resolve"]
