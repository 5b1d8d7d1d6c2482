"""The files a compile may read through `#include`, for the program cache's key.

hiprtc and nvrtc report no dependency list, so the source's `#include "..."` and `<...>` lines
are resolved here the way the compilers search: a quoted name in the including file's
directory (for the source and `headers=`, the program name's directory, which clang-based
hiprtc uses), then in every `-I` / `--include-path=` directory in order. Every file found is
followed in turn (includes of includes), and each one's path and contents go into the key, so
editing, adding or removing any header that a compile can reach compiles again.

Limits: an include whose name comes from a macro (`#include MACRO`) or a computed
`__has_include` cannot be followed; the compiler's own system directories are not searched
(they are part of the compiler's identity, which the key names); and the search
over-approximates: a same-named header later in the path, or one behind `#if 0`, is hashed too,
which only costs a recompile when it changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\r\n]+)[">]', re.M)
_PREFIXES = ("--include-path=", "-I")


def include_dirs(options: Sequence[str]) -> list[str]:
    """The `-I` directories of compiler options: `-Idir`, `--include-path=dir`, `-I dir`."""
    dirs: list[str] = []
    pending = False
    for option in options:
        if pending:
            dirs.append(option)
            pending = False
        elif option in ("-I", "--include-path"):
            pending = True
        else:
            for prefix in _PREFIXES:
                if option.startswith(prefix) and len(option) > len(prefix):
                    dirs.append(option[len(prefix) :])
                    break
    return dirs


def included_files(
    source: str, options: Sequence[str], headers: Mapping[str, str], *, name: str
) -> list[tuple[str, bytes]]:
    """(path, contents) of every file on disk that `source` (and the `headers=` contents) may
    include, directly or through other includes, sorted by path."""
    dirs = include_dirs(options)
    top = os.path.dirname(name) or "."
    found: dict[str, bytes] = {}
    pending = [(text.encode(), top) for text in (source, *headers.values())]
    while pending:
        text, here = pending.pop()
        for quote, included in _INCLUDE.findall(text):
            name_on_disk = os.fsdecode(included)
            for directory in [here, *dirs] if quote == b'"' else dirs:
                path = os.path.normpath(os.path.join(directory, name_on_disk))
                if path in found:
                    continue
                contents = _read_regular(path)
                if contents is not None:
                    found[path] = contents
                    pending.append((contents, os.path.dirname(path)))
    return sorted(found.items())


def _read_regular(path: str) -> bytes | None:
    """A regular file's bytes, or None (missing, unreadable, a directory or a FIFO)."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None
