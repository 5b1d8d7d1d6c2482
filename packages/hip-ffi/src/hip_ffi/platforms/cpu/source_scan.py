"""Find the kernels and `extern __shared__` arrays of a program, and generate its entry points.

The runtime cannot know a kernel's parameter types from its name, so the compiler appends one
`HIPCPU_KERNEL(name)` per kernel: a template instantiation that unpacks the packed argument
buffer by the function's own parameter types and runs the grid (hip_cpu_executor.h).

The names are found in the *preprocessed* program (g++ -E with the prelude in scan mode, where
`__global__` and `__shared__` become marker tokens), so macros, #if and included headers are
all accounted for. A kernel must be a non-template function at global namespace scope, as
`extern "C" __global__` kernels are (docs/architecture.md, Kernels); templates are skipped
(they have no name to look up), and an extern shared array must be declared at global scope
or in a kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

GLOBAL_MARKER = "__hipcpu_global__"
SHARED_MARKER = "__hipcpu_shared__"

_TOKEN = re.compile(r'\s+|"(?:\\.|[^"\\])*"|[A-Za-z_]\w*|\[\[|.', re.S)
_NOT_NAMES = {"__attribute__", "__declspec", "alignas", "decltype", "__launch_bounds__"}
_EXTERN = re.compile(r"\bextern\b")
_TEMPLATE = re.compile(r"\btemplate\b")
_ARRAY_NAME = re.compile(r"([A-Za-z_]\w*)\s*\[\s*\]\s*$")


def _declaration_start(text: str, at: int) -> int:
    """Index just after the `;`, `{` or `}` that ends whatever precedes position `at`."""
    return max(text.rfind(c, 0, at) for c in ";{}") + 1


def _skip_balanced(text: str, at: int, opening: str, closing: str) -> int:
    """From an opening bracket at `at`, the index after its matching closing bracket."""
    depth = 0
    for i in range(at, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _kernel_name(text: str, at: int) -> str | None:
    """The name declared by the declaration that continues at `at` (after the marker)."""
    last: str | None = None
    i = at
    while i < len(text):
        match = _TOKEN.match(text, i)
        if match is None:
            return None
        token = match.group(0)
        if token == "(":
            return last
        if token in ";{}":
            return None
        if token in _NOT_NAMES:
            paren = text.find("(", match.end())
            i = _skip_balanced(text, paren, "(", ")") if paren >= 0 else len(text)
            continue
        if token == "[[":
            i = text.find("]]", match.end()) + 2 if "]]" in text[match.end() :] else len(text)
            continue
        if token[0].isalpha() or token[0] == "_":
            last = token
        i = match.end()
    return None


def _marked(text: str, marker: str) -> Iterator[tuple[int, int]]:
    """(where `marker` stands, where its declaration starts), for each `marker` in `text`."""
    at = text.find(marker)
    while at >= 0:
        yield at, _declaration_start(text, at)
        at = text.find(marker, at + len(marker))


def find_kernels(preprocessed: str) -> list[str]:
    """Names of the non-template __global__ functions, in order of first appearance."""
    names: dict[str, None] = {}  # a dict keeps the first appearance's order, once each
    for at, start in _marked(preprocessed, GLOBAL_MARKER):
        if not _TEMPLATE.search(preprocessed, start, at):
            name = _kernel_name(preprocessed, at + len(GLOBAL_MARKER))
            if name:
                names[name] = None
    return list(names)


def find_dynamic_shared(preprocessed: str) -> list[str]:
    """Names of the `extern __shared__ T name[];` arrays."""
    names: dict[str, None] = {}
    for at, start in _marked(preprocessed, SHARED_MARKER):
        end = preprocessed.find(";", at)
        if _EXTERN.search(preprocessed, start, at) and end >= 0:
            match = _ARRAY_NAME.search(preprocessed, at, end)
            if match:
                names[match.group(1)] = None
    return list(names)


def entry_points(kernels: list[str], dynamic_shared: list[str]) -> str:
    """The code appended to the program: the executor and one entry point per kernel."""
    lines = ["", '#line 1 "<hip-ffi cpu entry points>"', '#include "hip_cpu_executor.h"']
    lines += [f"HIPCPU_KERNEL({name})" for name in kernels]
    lines += [f"HIPCPU_DYNAMIC_SHARED({name})" for name in dynamic_shared]
    return "\n".join(lines) + "\n"
