"""The portable HIP C++ kernels (the repository's `kernels/`) and programs built from them.

An installed wheel carries them as `hip_runtime/kernels/` (hatch force-include); in a source
checkout they are read from the repository's `kernels/` directory. Each `<family>.hip` is one
translation unit; the `*.h` files are the headers every unit may include.

    from hip_runtime import kernel_sources

    module = kernel_sources.program("norms.hip").load(device)   # compiled once, then cached
    module.get_kernel("rmsnorm_bf16").launch(rows, 256, x, w, y, rows, cols, 1e-6)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hip_core import Program

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

#: The checkout's kernels/ relative to this file: packages/hip-runtime/src/hip_runtime/. An
#: installed copy may sit fewer folders deep, so the path is only computed when there are enough.
_HERE = Path(__file__).resolve()
_CHECKOUT_KERNELS = (
    _HERE.parents[4] / "kernels" if len(_HERE.parents) > 4 else _HERE / "no-checkout"
)


def kernels_dir() -> Traversable:
    """Where the kernel sources are: inside the installed package, else the checkout."""
    packaged = resources.files("hip_runtime").joinpath("kernels")
    if packaged.is_dir():
        return packaged
    if _CHECKOUT_KERNELS.is_dir():
        return _CHECKOUT_KERNELS
    raise FileNotFoundError(
        f"no kernel sources: neither {packaged} (installed wheel) nor {_CHECKOUT_KERNELS} "
        "(source checkout) exists"
    )


@functools.cache
def _read(suffix: str) -> tuple[tuple[str, str], ...]:
    directory = kernels_dir()
    files = sorted(
        (entry for entry in directory.iterdir() if entry.name.endswith(suffix)),
        key=lambda entry: entry.name,
    )
    return tuple((entry.name, entry.read_text(encoding="utf-8")) for entry in files)


def sources() -> dict[str, str]:
    """{file name: source} of every kernel translation unit, e.g. "norms.hip"."""
    return dict(_read(".hip"))


def headers() -> dict[str, str]:
    """{include name: content} of the shared headers, for `Program(headers=...)`."""
    return dict(_read(".h"))


def program(name: str, *, options: Sequence[str] = ()) -> Program:
    """A hip-core Program of the kernel source `name` (e.g. "norms.hip") with its headers.

    `Program.load(device)` compiles it for the device on first use; later loads come from
    hip-core's program cache.
    """
    units = sources()
    if name not in units:
        raise KeyError(f"no kernel source {name!r}; there are: {', '.join(sorted(units))}")
    return Program(units[name], name=name, options=options, headers=headers())


__all__ = ["headers", "kernels_dir", "program", "sources"]
