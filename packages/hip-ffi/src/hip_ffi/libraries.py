"""Finding and opening shared libraries, with overrides and a full account of what was tried."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hip_ffi.api import Unavailable
from hip_ffi.errors import LibraryNotFoundError


@dataclass(frozen=True)
class LibrarySpec:
    """Where a library may be found.

    Attributes:
        role: what it is, for messages ("hip runtime", "hipblas", "cuda runtime"...).
        env: environment variable that forces one path; when set, nothing else is tried.
        names: file names in order of preference (newest first, e.g. libamdhip64.so.7, .6, .5).
        dirs: directories searched before the dynamic linker's own search (by bare name).
    """

    role: str
    env: str
    names: Sequence[str]
    dirs: Sequence[str] = field(default_factory=tuple)

    def candidates(self) -> list[str]:
        forced = os.environ.get(self.env)
        if forced:
            return [forced]
        paths = [str(Path(d) / n) for d in self.dirs for n in self.names if Path(d, n).exists()]
        return paths + list(self.names)  # bare names: the dynamic linker's search path


def open_library(ffi: Any, spec: LibrarySpec) -> tuple[Any, str]:
    """dlopen the first candidate that loads; returns (library, path or name that loaded).

    Raises LibraryNotFoundError listing every candidate and why it failed.
    """
    tried: list[tuple[str, str]] = []
    for candidate in spec.candidates():
        try:
            return ffi.dlopen(candidate), resolved_path(candidate)
        except OSError as error:
            tried.append((candidate, _short_reason(error)))
    hint = f"set {spec.env} to the library's path to choose one explicitly"
    raise LibraryNotFoundError(spec.role, tried, hint)


def missing_library(
    names: Iterable[str], what: str, spec: LibrarySpec, error: LibraryNotFoundError
) -> dict[str, Unavailable]:
    """Stand-ins for the functions `names` of an optional library (`what`, e.g. "hipBLAS") that
    did not open: calling one says so, with every path tried and the variable that picks one."""
    tried = ", ".join(path for path, _ in error.tried) or "nothing"
    reason = f"no {what} library (tried {tried}; {spec.env} picks one)"
    return {name: Unavailable(name, reason) for name in names}


def env_dirs(*variables: str, suffixes: Iterable[str] = ("lib", "lib64")) -> list[str]:
    """`$VAR/lib`, `$VAR/lib64` for each variable that is set (ROCM_PATH, CUDA_HOME...)."""
    dirs = []
    for variable in variables:
        root = os.environ.get(variable)
        if root:
            dirs += [str(Path(root) / suffix) for suffix in suffixes]
    return dirs


def resolved_path(candidate: str, maps_file: str = "/proc/self/maps") -> str:
    """The file a bare library name resolved to, read from the process's own mappings."""
    if os.sep in candidate:
        return candidate
    try:
        with open(maps_file) as maps:
            for line in maps:
                name = Path(line.rsplit(" ", 1)[-1].strip()).name
                # libcuda.so.1 is a link to libcuda.so.580.x: match up to ".so".
                if name == candidate or name.startswith(candidate.split(".so")[0] + ".so"):
                    return line.rsplit(" ", 1)[-1].strip()
    except OSError:
        pass
    return candidate


def _short_reason(error: OSError) -> str:
    text = str(error)
    return text.split(": ", 1)[-1] if ": " in text else text
