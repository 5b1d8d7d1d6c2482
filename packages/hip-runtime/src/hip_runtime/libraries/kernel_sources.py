"""The portable HIP C++ kernels (the repository's `kernels/`) and programs built from them.

An installed wheel carries them as `hip_runtime/kernels/` (hatch force-include); in a source
checkout they are read from the repository's `kernels/` directory. Each `<family>.hip` is one
translation unit; the `*.h` files are the headers every unit may include.

    from hip_runtime.libraries import kernel_sources

    module = kernel_sources.program("norms.hip").load(device)   # compiled once, then cached
    module.get_kernel("rmsnorm_bf16").launch(rows, 256, x, w, y, rows, cols, 1e-6)
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hip_core import Program
from hip_runtime.libraries.kernel_structs import STRUCTS

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable


def checkout_kernels(package: Path) -> Path:
    """A source checkout's kernels/ from its package folder (packages/hip-runtime/src/
    hip_runtime/): counted from the package, not this file, so moving the module between the
    package's folders cannot silently point it elsewhere. An installed copy may sit fewer
    folders deep: then a path that does not exist."""
    return package.parents[3] / "kernels" if len(package.parents) > 3 else package / "no-checkout"


_PACKAGE = Path(__file__).resolve().parents[1]  # (this file is in the package's libraries/)
_CHECKOUT_KERNELS = checkout_kernels(_PACKAGE)


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
    """{file name: source} of every kernel translation unit, e.g. "norms.hip", with its
    per-dtype entry-point lists written out (see `expand_type_lists`)."""
    return dict(_expanded())


@functools.cache
def _expanded() -> tuple[tuple[str, str], ...]:
    lists = type_lists(dict(_read(".h")).get("dtypes.h", ""))
    return tuple((name, expand_type_lists(text, lists)) for name, text in _read(".hip"))


# `#define HIPK_FLOAT_TYPES(X) X(f32, float) ...` in dtypes.h; in a source, a line of its own
# `HIPK_FLOAT_TYPES(NAME)` that applies a `#define NAME(S, T) ...` to every (suffix, type).
_LIST = re.compile(r"^#define (HIPK_\w+_TYPES?)\(X\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_ENTRY = re.compile(r"X\(\s*(\w+)\s*,\s*([^()]+?)\s*\)")
_USE = re.compile(r"^(HIPK_\w+_TYPES?)\((\w+)\)[ \t]*;?[ \t]*$", re.M)
_MACRO = r"^#define {}\((\w+),\s*(\w+)\)((?:[^\n]*\\\n)*[^\n]*)"


def type_lists(header: str) -> dict[str, list[tuple[str, str]]]:
    """{list name: [(suffix, C type), ...]} of dtypes.h's X-macro lists (a list may name
    others, e.g. HIPK_ALL_TYPES)."""
    bodies = {name: body.replace("\\\n", " ") for name, body in _LIST.findall(header)}
    lists: dict[str, list[tuple[str, str]]] = {}

    def entries(name: str) -> list[tuple[str, str]]:
        if name not in lists:
            body = bodies[name]
            found = [(s, t.strip()) for s, t in _ENTRY.findall(body)]
            for other in re.findall(r"(HIPK_\w+_TYPES?)\(X\)", body):
                found += entries(other)
            lists[name] = found
        return lists[name]

    for name in bodies:
        entries(name)
    return lists


def expand_type_lists(text: str, lists: dict[str, list[tuple[str, str]]]) -> str:
    """`text` with each top-level `HIPK_<LIST>_TYPES(NAME)` line replaced by NAME's body for
    every (suffix, type) of the list: the compilers would expand it the same way, but hip-core
    reads a kernel's parameter types from the text before preprocessing, so the entry points
    must be written out. Only those lines change; everything else reaches the compiler as
    written (the #define stays, unused)."""

    def expand(use: re.Match[str]) -> str:
        found = re.search(_MACRO.format(re.escape(use.group(2))), text, re.M)
        if use.group(1) not in lists or found is None:
            return use.group(0)  # not an entry-point list: the compiler's business
        suffix, type_name, body = found.groups()
        body = body.replace("\\\n", "\n")
        out = []
        for s, t in lists[use.group(1)]:
            one = re.sub(rf"\s*##\s*{suffix}\b", s, body)
            one = re.sub(rf"\b{suffix}\s*##\s*", s, one)
            one = re.sub(rf"\b{suffix}\b", s, one)
            out.append(re.sub(rf"\b{type_name}\b", t, one).strip())
        return "\n".join(out)

    return _USE.sub(expand, text)


def headers() -> dict[str, str]:
    """{include name: content} of the shared headers, for `Program(headers=...)`."""
    return dict(_read(".h"))


def program(name: str, *, options: Sequence[str] = ()) -> Program:
    """A hip-core Program of the kernel source `name` (e.g. "norms.hip") with its headers and
    the layouts of the structs its entry points take by value (kernel_structs.STRUCTS).

    `Program.load(device)` compiles it for the device on first use; later loads come from
    hip-core's program cache.
    """
    units = sources()
    if name not in units:
        raise KeyError(f"no kernel source {name!r}; there are: {', '.join(sorted(units))}")
    return Program(
        units[name], name=name, options=options, headers=headers(), types=STRUCTS.get(name)
    )


__all__ = ["expand_type_lists", "headers", "kernels_dir", "program", "sources", "type_lists"]
