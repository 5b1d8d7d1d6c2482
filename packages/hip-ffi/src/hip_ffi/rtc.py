"""One hiprtc compile, start to finish: create, name expressions, compile, read the log, the
code and the lowered names, destroy.

The hiprtc surface takes many calls and careful buffer handling for one compile; every layer
above (hip-core's Program, tests, benchmarks) goes through `compile_source` instead.

`DEPRECATED_SPELLINGS` is what every platform's front end adds to a program (a prologue on
amd, the pre-included stand-in header on nvidia, a forced include on cpu): HIP's deprecated
but common macros, in HIP's own spelling (an identical redefinition by a release's headers is
no error), so that sample code written for hipcc compiles unchanged with run-time compilers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CompileResult:
    """What a compile gave: the hiprtcResult of the step that decided it, the compiler's log,
    and the code object (empty unless `status` is 0)."""

    status: int
    log: str
    code: bytes
    step: str  # the hiprtc call `status` came from, for messages
    #: {name expression: lowered (mangled) name} for each expression the compile was given.
    lowered: Mapping[str, str] = field(default_factory=dict)

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
    name_expressions: Sequence[str] = (),
) -> CompileResult:
    """Compile `source` with the platform's hiprtc (`api` is a HipApi).

    `options` go to hiprtcCompileProgram as given (name the target with
    `--offload-arch=<arch>`); `headers` ({include name: content}) are what `#include "name"`
    finds; `name_expressions` (e.g. "k<64>", "ns::saxpy") are registered with
    hiprtcAddNameExpression, and the result's `lowered` maps each to the name the code object
    knows it by (hiprtcGetLoweredName). Never raises for a compile error: the status and log
    say what happened.
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
        for expression in name_expressions:
            status = api.hiprtcAddNameExpression(program[0], expression.encode())
            if status:
                return CompileResult(status, "", b"", "hiprtcAddNameExpression")
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
        lowered, out = {}, ffi.new("const char**")
        for expression in name_expressions:
            status = api.hiprtcGetLoweredName(program[0], expression.encode(), out)
            if status:
                log += f"\nname expression {expression!r} has no lowered name"
                return CompileResult(status, log, b"", "hiprtcGetLoweredName")
            lowered[expression] = ffi.string(out[0]).decode()
        return CompileResult(0, log, bytes(ffi.buffer(code, size[0])), "hiprtcGetCode", lowered)
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


#: HIP's deprecated spellings (HIP's own definitions), for every platform's front end.
DEPRECATED_SPELLINGS = "".join(
    f"#define hip{builtin[0].upper()}{builtin[1:]}_{axis} {builtin}.{axis}\n"
    for builtin in ("threadIdx", "blockIdx", "blockDim", "gridDim")
    for axis in "xyz"
) + (
    "#ifndef HIP_DYNAMIC_SHARED\n"
    "#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];\n"
    "#define HIP_DYNAMIC_SHARED_ATTRIBUTE\n"
    "#endif\n"
    "#ifndef HIP_KERNEL_NAME\n"
    "#define HIP_KERNEL_NAME(...) __VA_ARGS__\n"
    "#endif\n"
)


def closing_bracket(text: str, at: int, opening: str, closing: str) -> int:
    """Index of the bracket that closes the `opening` one at `at` in C source `text`
    (len(text) when unbalanced): for the source scans of hip-ffi's cpu platform and hip-core."""
    end = text.find(closing, at + 1)
    if end >= 0 and text.find(opening, at + 1, end) < 0:
        return end  # the common case, nothing nested: found without a Python loop
    depth = 0
    for i in range(at, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return len(text)


# ---- C++ scopes, for the kernel scans --------------------------------------------------------

# `\b` after each name: without it a name can be split anywhere and a failed match (a namespace
# with an attribute before its brace) backtracks exponentially.
_NAMESPACE = re.compile(r"namespace\b\s*((?:[A-Za-z_]\w*\b\s*(?:::\s*)?)*)\{")
_EXTERN_BLOCK = re.compile(r'extern\b\s*"C(?:\+\+)?"\s*\{')


@functools.cache
def _scope_tokens(markers: tuple[str, ...]) -> re.Pattern[str]:
    # Literal alternatives only (each position costs one dispatch on its first character): a
    # namespace or extern block is read by an anchored match where the keyword stands.
    literals = "|".join(re.escape(m) for m in markers)
    return re.compile(
        r'[{}]|namespace|extern|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|' + literals
    )


def scopes(
    text: str, markers: Sequence[str]
) -> Iterator[tuple[int, str, tuple[str | None, ...], bool]]:
    """(position, marker, scope stack, inside `extern "C"`) for every marker in C++ `text`.

    The stack has one entry per open brace: "ns::" for a namespace (nested ones as written:
    "a::b::"), "" for an anonymous namespace or an `extern "C" {}` block, None for anything
    else (a class, a function body, an initializer). String and character literals are skipped.
    """
    stack: list[str | None] = []
    externs: list[bool] = []
    skip = -1  # a namespace's or extern block's own `{` is consumed with it
    for match in _scope_tokens(tuple(markers)).finditer(text):
        token, at = match.group(0), match.start()
        if at < skip or token[0] in "\"'":
            continue
        if token == "{":
            stack.append(None)
            externs.append(False)
        elif token == "}":
            if stack:
                stack.pop()
                externs.pop()
        elif token in ("namespace", "extern"):
            if at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
                continue
            block = (_NAMESPACE if token == "namespace" else _EXTERN_BLOCK).match(text, at)
            if block is not None:
                name = "".join((block.group(1) or "").split()) if token == "namespace" else ""
                stack.append(f"{name}::" if name else "")
                externs.append(token == "extern")
                skip = block.end()
        else:
            yield at, token, tuple(stack), any(externs)
