"""Programs: HIP C++ compiled at run time for a device, with a disk cache of code objects.

Options: include directories are given to the compiler as `-I<absolute path>`, resolved
against the current working directory when the program compiles, whichever form they came in
(`-Idir`, `"-I", "dir"`, `--include-path=dir`...; `hip_core.includes.resolved_options`); one
that does not exist raises FileNotFoundError before anything is compiled.

The cache lives in `$HIP_CORE_CACHE_DIR`, else `$XDG_CACHE_HOME/hip-core/programs`, else
`~/.cache/hip-core/programs`; `HIP_CORE_CACHE=0` turns it off. An entry is keyed on the
platform, the compiler's identity and version, the target arch, the name, the options, the
source, every `headers=` entry and every file on disk the compile may include (found through
the `-I` directories, includes of includes too: `hip_core.includes`), so any change compiles
again. A program whose includes that search cannot follow (`#include MACRO`, `-include f`...)
is never cached (`cache_key` is None): hiprtc does not say which files it read, so no key could
be sure to cover them. Entries are written atomically (temporary file + rename; the temporary
file is removed when that fails) and carry a checksum: a corrupt or truncated entry is
detected, discarded and rebuilt. `load()` caches only code that loaded, and a cached entry
that fails to load is removed and compiled again.

Name expressions: a program registers its `name_expressions` (template instantiations such as
`k<64>`) and the qualified name of every non-template kernel with C++ linkage or in a
namespace (`saxpy`, `ns::k`), so that `get_kernel` finds them by those names on every platform
(a GPU compiler mangles them); their lowered names are cached with the code object.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core.errors import HipError, HipOutOfMemoryError, check_hiprtc
from hip_core.includes import normalized_options, resolved_options, scan_includes
from hip_core.kernel_scan import scan_kernels
from hip_ffi.rtc import compile_source

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.module import Module

# hashlib and tempfile are imported where a compile or a cache entry needs them: together 15 ms
# of every `import hip_core` otherwise (issue 15), for programs most imports never build.

_MAGIC = b"HIPCORE1"
_NAMES = b"HIPCORE-NAMES\0"  # a payload with lowered names: this, 4-byte length, JSON, code


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
            `compile`. An include directory may come as "-Idir", "-I dir", ("-I", "dir") or
            "--include-path=dir", relative to the working directory at compile time. TypeError
            for a str (not a sequence of them); ValueError for "-I" with no directory.
        headers: {include name: content} made available to `#include "name"`.
        name_expressions: template instantiations to compile and find by name, e.g.
            `["transpose<32>", "transpose<64>"]` (`Module.get_kernel("transpose<32>")`).
        types: the layouts of user structs that kernels take by value, by type name: a numpy
            structured dtype (built with align=True) or a ctypes Structure class.
    """

    def __init__(
        self,
        source: str,
        *,
        name: str = "program.hip",
        options: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        name_expressions: Sequence[str] = (),
        types: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"the program name must be a str, not {type(name).__name__}")
        if not name or name.startswith("-") or any(c in name for c in "\0\r\n"):
            raise ValueError(f"invalid program name {name!r}: a file name, never an option")
        if isinstance(options, str) or not all(isinstance(o, str) for o in options):
            raise TypeError(f"options must be a sequence of str, not {options!r}")
        normalized_options(options)  # ValueError now for a malformed one ("-I" with no dir)
        self.source = source
        self.name = name
        self.options = tuple(options)
        self.headers = dict(headers or {})
        if isinstance(name_expressions, str) or not all(
            isinstance(n, str) and n.strip() for n in name_expressions
        ):
            raise TypeError(
                f"name_expressions must be a sequence of names, not {name_expressions!r}"
            )
        self.name_expressions = tuple(name_expressions)
        self.types = dict(types or {})

    @property
    def lookup_names(self) -> tuple[str, ...]:
        """The name expressions every compile registers: `name_expressions`, then the qualified
        name of each non-template kernel with C++ linkage or in a namespace."""
        linked = [
            decl.name
            for decl in scan_kernels(self.source).values()
            if not decl.template and (not decl.c_linkage or "::" in decl.name)
        ]
        return tuple(dict.fromkeys((*self.name_expressions, *linked)))

    def cache_key(self, arch: str) -> str | None:
        """The key of this program's cache entry for `arch`, with the options resolved now; None
        when it cannot be cached (an include the scan cannot follow: `hip_core.includes`)."""
        import hashlib

        options = resolved_options(self.options)
        scan = scan_includes(self.source, options, self.headers, name=self.name)
        if scan.unfollowed:
            return None
        digest = hashlib.sha256()
        parts: list[str | bytes] = [compiler_identity(), arch, self.name, *options]
        parts.append(self.source)
        parts += ["name expressions", *self.name_expressions]
        for include, content in sorted(self.headers.items()):
            parts += [include, content]
        parts.append("files on disk")  # what follows can never be taken for headers=
        for path, contents in scan.files:
            parts += [path, contents]
        for part in parts:
            encoded = part.encode() if isinstance(part, str) else part
            digest.update(len(encoded).to_bytes(8, "little"))  # unambiguous concatenation
            digest.update(encoded)
        return digest.hexdigest()

    def compile(self, device: Device) -> bytes:
        """The code object for `device`'s arch: from the disk cache, else compiled now (and
        cached).

        Raises HipCompileError carrying the compiler's full log; FileNotFoundError for an
        include directory that does not exist.
        """
        code, names, entry, cached = self._cached_or_compiled(device.arch)
        if entry is not None and not cached:
            _write_entry(entry, _with_names(code, names))
        return code

    def load(self, device: Device) -> Module:
        """Compile (or fetch from cache) and load as a Module that knows this source's kernels,
        its name expressions and `types`.

        Code is cached only once it has loaded; a cached entry that does not load (HipError) is
        removed, compiled again and loaded once more.
        """
        code, names, entry, cached = self._cached_or_compiled(device.arch)
        try:
            module = self._module(code, names, device)
        except HipOutOfMemoryError:
            raise  # the device is full, not the code bad
        except HipError:
            if not cached or entry is None:
                raise  # freshly compiled: nothing was cached
            entry.unlink(missing_ok=True)
            (code, names), cached = self._compile(device.arch), False
            module = self._module(code, names, device)
        if entry is not None and not cached:
            _write_entry(entry, _with_names(code, names))
        return module

    def _module(self, code: bytes, names: dict[str, str], device: Device) -> Module:
        from hip_core.module import Module

        return Module.from_bytes(code, device, source=self.source, names=names, types=self.types)

    def _cached_or_compiled(self, arch: str) -> tuple[bytes, dict[str, str], Path | None, bool]:
        """(code, lowered names, its cache entry or None when caching is off, whether it came
        from there)."""
        directory = cache_dir()
        key = self.cache_key(arch) if directory else None
        entry = directory / f"{key}.bin" if directory and key else None
        if entry is not None:
            payload = _read_entry(entry)
            found = _split_names(payload) if payload is not None else None
            if found is not None and set(found[1]) == set(self.lookup_names):
                return *found, entry, True
        return *self._compile(arch), entry, False

    def _compile(self, arch: str) -> tuple[bytes, dict[str, str]]:
        result = compile_source(
            hip(),
            self.source,
            name=self.name,
            options=(*resolved_options(self.options), f"--offload-arch={arch}"),
            headers=self.headers,
            name_expressions=self.lookup_names,
        )
        check_hiprtc(result.status, result.step, result.log)
        code: bytes = result.code
        return code, dict(result.lowered)


def _with_names(code: bytes, names: dict[str, str]) -> bytes:
    """A cache payload: the code, after its lowered names when there are any."""
    if not names:
        return code
    table = json.dumps(names, sort_keys=True).encode()
    return _NAMES + len(table).to_bytes(4, "little") + table + code


def _split_names(payload: bytes) -> tuple[bytes, dict[str, str]] | None:
    """(code, lowered names) of a cache payload; None when its name table is unreadable."""
    if not payload.startswith(_NAMES):
        return payload, {}
    at = len(_NAMES) + 4
    size = int.from_bytes(payload[len(_NAMES) : at], "little")
    try:
        names = json.loads(payload[at : at + size])
    except ValueError:
        return None
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        return None
    return payload[at + size :], names


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
