"""Programs: HIP C++ compiled at run time for a device, with a disk cache of code objects.

The cache lives in `$HIP_CORE_CACHE_DIR`, else `$XDG_CACHE_HOME/hip-core/programs`, else
`~/.cache/hip-core/programs`; `HIP_CORE_CACHE=0` turns it off. An entry is keyed on the
platform, the compiler's identity and version, the target arch, the name, the options, the
source, every `headers=` entry and every file on disk the compile may include (found through
the `-I` directories, includes of includes too: `hip_core.includes`), so any change compiles
again. Entries are written atomically (temporary file + rename; the temporary file is removed
when that fails) and carry a checksum: a corrupt or truncated entry is detected, discarded and
rebuilt. `load()` caches only code that loaded, and a cached entry that fails to load is
removed and compiled again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hip_core._hip import hip
from hip_core.errors import HipError, HipOutOfMemoryError, check_hiprtc
from hip_core.includes import included_files
from hip_ffi.rtc import compile_source

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.module import Module

# hashlib and tempfile are imported where a compile or a cache entry needs them: together 15 ms
# of every `import hip_core` otherwise (issue 15), for programs most imports never build.

_MAGIC = b"HIPCORE1"


def cache_dir() -> Path | None:
    """Where compiled programs are cached, or None when caching is switched off."""
    if os.environ.get("HIP_CORE_CACHE", "1") == "0":
        return None
    explicit = os.environ.get("HIP_CORE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hip-core" / "programs"


def compiler_identity() -> str:
    """The platform, its release and the hiprtc version: part of every cache key."""
    api = hip()
    major, minor = api.ffi.new("int*"), api.ffi.new("int*")
    check_hiprtc(api.hiprtcVersion(major, minor), "hiprtcVersion")
    return f"{api.platform}|{api.platform_version}|hiprtc {major[0]}.{minor[0]}"


class Program:
    """HIP C++ source to be compiled by the platform's hiprtc.

    Args:
        source: the translation unit.
        name: its file name in diagnostics; never an option, so it must not start with "-"
            (nor be empty or hold a NUL or a line break): ValueError.
        options: compiler options (e.g. "-O3", "-DBLOCK=256"); the target arch is added by
            `compile`.
        headers: {include name: content} made available to `#include "name"`.
    """

    def __init__(
        self,
        source: str,
        *,
        name: str = "program.hip",
        options: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"the program name must be a str, not {type(name).__name__}")
        if not name or name.startswith("-") or any(c in name for c in "\0\r\n"):
            raise ValueError(f"invalid program name {name!r}: a file name, never an option")
        self.source = source
        self.name = name
        self.options = tuple(options)
        self.headers = dict(headers or {})

    def cache_key(self, arch: str) -> str:
        import hashlib

        digest = hashlib.sha256()
        parts: list[str | bytes] = [compiler_identity(), arch, self.name, *self.options]
        parts.append(self.source)
        for include, content in sorted(self.headers.items()):
            parts += [include, content]
        parts.append("files on disk")  # what follows can never be taken for headers=
        for path, contents in included_files(
            self.source, self.options, self.headers, name=self.name
        ):
            parts += [path, contents]
        for part in parts:
            encoded = part.encode() if isinstance(part, str) else part
            digest.update(len(encoded).to_bytes(8, "little"))  # unambiguous concatenation
            digest.update(encoded)
        return digest.hexdigest()

    def compile(self, device: Device) -> bytes:
        """The code object for `device`'s arch: from the disk cache, else compiled now (and
        cached).

        Raises HipCompileError carrying the compiler's full log.
        """
        code, entry, cached = self._cached_or_compiled(device.arch)
        if entry is not None and not cached:
            _write_entry(entry, code)
        return code

    def load(self, device: Device) -> Module:
        """Compile (or fetch from cache) and load as a Module that knows this source's kernels.

        Code is cached only once it has loaded; a cached entry that does not load (HipError) is
        removed, compiled again and loaded once more.
        """
        from hip_core.module import Module

        code, entry, cached = self._cached_or_compiled(device.arch)
        try:
            module = Module.from_bytes(code, device, source=self.source)
        except HipOutOfMemoryError:
            raise  # the device is full, not the code bad
        except HipError:
            if not cached or entry is None:
                raise  # freshly compiled: nothing was cached
            entry.unlink(missing_ok=True)
            code, cached = self._compile(device.arch), False
            module = Module.from_bytes(code, device, source=self.source)
        if entry is not None and not cached:
            _write_entry(entry, code)
        return module

    def _cached_or_compiled(self, arch: str) -> tuple[bytes, Path | None, bool]:
        """(code, its cache entry or None when caching is off, whether it came from there)."""
        directory = cache_dir()
        entry = directory / f"{self.cache_key(arch)}.bin" if directory else None
        if entry is not None:
            cached = _read_entry(entry)
            if cached is not None:
                return cached, entry, True
        return self._compile(arch), entry, False

    def _compile(self, arch: str) -> bytes:
        result = compile_source(
            hip(),
            self.source,
            name=self.name,
            options=(*self.options, f"--offload-arch={arch}"),
            headers=self.headers,
        )
        check_hiprtc(result.status, result.step, result.log)
        code: bytes = result.code
        return code


def _read_entry(path: Path) -> bytes | None:
    """The payload of a cache entry, or None when missing or corrupt (a corrupt one is removed)."""
    import hashlib

    try:
        blob = path.read_bytes()
    except OSError:
        return None
    header = len(_MAGIC) + 32
    payload = blob[header:]
    if (
        blob[: len(_MAGIC)] == _MAGIC
        and hashlib.sha256(payload).digest() == blob[len(_MAGIC) : header]
    ):
        return payload
    path.unlink(missing_ok=True)
    return None


def _write_entry(path: Path, payload: bytes) -> None:
    """Write atomically: a reader sees the old entry, no entry, or the whole new one. Nothing is
    left behind when that fails (a cache that cannot be written costs a recompile next time)."""
    import hashlib
    import tempfile

    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as tmp:
            temporary = tmp.name
            tmp.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, path)
        temporary = None
    except OSError:
        pass
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
