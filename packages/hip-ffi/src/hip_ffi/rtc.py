"""One hiprtc compile, start to finish: create, compile, read the log and the code, destroy.

The hiprtc surface takes five calls and careful buffer handling for one compile; every layer
above (hip-core's Program, tests, benchmarks) goes through `compile_source` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CompileResult:
    """What a compile gave: the hiprtcResult of the step that decided it, the compiler's log,
    and the code object (empty unless `status` is 0)."""

    status: int
    log: str
    code: bytes
    step: str  # the hiprtc call `status` came from, for messages

    @property
    def ok(self) -> bool:
        return self.status == 0


def _text(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def compile_source(
    api: Any,
    source: str | bytes,
    *,
    name: str = "program.hip",
    options: Sequence[str | bytes] = (),
    headers: Mapping[str, str | bytes] | None = None,
) -> CompileResult:
    """Compile `source` with the platform's hiprtc (`api` is a HipApi).

    `options` go to hiprtcCompileProgram as given (name the target with
    `--offload-arch=<arch>`); `headers` ({include name: content}) are what `#include "name"`
    finds. Never raises for a compile error: the status and log say what happened.
    """
    ffi = api.ffi
    headers = headers or {}
    keep = [ffi.new("char[]", _text(v)) for v in (*headers.values(), *headers.keys(), *options)]
    contents, includes, flags = (
        keep[: len(headers)],
        keep[len(headers) : 2 * len(headers)],
        keep[2 * len(headers) :],
    )
    program = ffi.new("hiprtcProgram*")
    status = api.hiprtcCreateProgram(
        program,
        _text(source),
        name.encode(),
        len(headers),
        ffi.new("char*[]", contents) if headers else ffi.NULL,
        ffi.new("char*[]", includes) if headers else ffi.NULL,
    )
    if status:
        return CompileResult(status, "", b"", "hiprtcCreateProgram")
    try:
        status = api.hiprtcCompileProgram(
            program[0], len(flags), ffi.new("char*[]", flags) if flags else ffi.NULL
        )
        log = _log(api, program[0])
        if status:
            return CompileResult(status, log, b"", "hiprtcCompileProgram")
        size = ffi.new("size_t*")
        status = api.hiprtcGetCodeSize(program[0], size)
        if status:
            return CompileResult(status, log, b"", "hiprtcGetCodeSize")
        code = ffi.new("char[]", size[0])
        status = api.hiprtcGetCode(program[0], code)
        if status:
            return CompileResult(status, log, b"", "hiprtcGetCode")
        return CompileResult(0, log, bytes(ffi.buffer(code, size[0])), "hiprtcGetCode")
    finally:
        api.hiprtcDestroyProgram(program)


def _log(api: Any, program: Any) -> str:
    ffi = api.ffi
    size = ffi.new("size_t*")
    if api.hiprtcGetProgramLogSize(program, size) != 0 or size[0] <= 1:
        return ""
    log = ffi.new("char[]", size[0])
    if api.hiprtcGetProgramLog(program, log) != 0:
        return ""
    return str(ffi.string(log).decode(errors="replace"))
