"""Find the kernels and `extern __shared__` arrays of a program, and generate its entry points.

The runtime cannot know a kernel's parameter types from its name, so the compiler appends one
entry point per kernel: an `extern "C"` pair (launch, describe) instantiating the executor's
templates for the function, which unpack the packed argument buffer by the function's own
parameter types and run the grid (hip_cpu_executor.h).

The names are found in the *preprocessed* program (g++ -E with the prelude in scan mode, where
`__global__` and `__shared__` become marker tokens), so macros, #if and included headers are
all accounted for. Every non-template `__global__` function at namespace scope gets an entry
point under its qualified name (`saxpy`, `ns::saxpy`), whatever its linkage; a template gets
one per name expression that names an instantiation (`k<64>`), which is also how hiprtc finds
them. Member functions are skipped, and an extern shared array must be declared at global scope
or in a kernel.

Entry-point symbols: `__hipcpu_launch_<name>` for a name that is a C identifier, else
`__hipcpu_launch___hipcpu_x_<escaped name>` (every character but letters and digits as `_hh`,
its hex code), which no identifier of a program can collide with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hip_ffi.rtc import closing_bracket, scopes

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
            i = closing_bracket(text, paren, "(", ")") + 1 if paren >= 0 else len(text)
            continue
        if token == "[[":
            i = text.find("]]", match.end()) + 2 if "]]" in text[match.end() :] else len(text)
            continue
        if token[0].isalpha() or token[0] == "_":
            last = token
        i = match.end()
    return None


def _namespaces(text: str, marker: str) -> Iterator[tuple[int, str | None, list[str]]]:
    """(position, qualifier, namespaces) of every `marker`: the qualifier is "ns::inner::"
    inside namespaces ("" at global scope; anonymous namespaces and `extern "C" {}` blocks add
    nothing), None inside anything else (a class, a function); the namespaces enclosing the
    marker, whatever lies between."""
    for at, _, stack, _ in scopes(text, (marker,)):
        named = [s for s in stack if s is not None]
        yield at, None if None in stack else "".join(named), named


def find_kernels(preprocessed: str) -> list[str]:
    """Qualified names of the non-template __global__ functions at namespace scope, in order of
    first appearance."""
    names: dict[str, None] = {}  # a dict keeps the first appearance's order, once each
    for at, qualifier, _ in _namespaces(preprocessed, GLOBAL_MARKER):
        start = _declaration_start(preprocessed, at)
        if qualifier is not None and not _TEMPLATE.search(preprocessed, start, at):
            name = _kernel_name(preprocessed, at + len(GLOBAL_MARKER))
            if name:
                names[qualifier + name] = None
    return list(names)


def canonical(expression: str) -> str:
    """A name expression as the cpu platform lowers it: `&` and spaces dropped, one space kept
    between two words (`k < unsigned  int >` is `k<unsigned int>`)."""
    text = expression.strip().removeprefix("&").strip()
    return re.sub(r"\s+", lambda m: " " if _joins(text, m.start(), m.end()) else "", text)


def _joins(text: str, start: int, end: int) -> bool:
    return start > 0 and end < len(text) and _word(text[start - 1]) and _word(text[end])


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def entry_symbol(name: str) -> str:
    """The part of the entry points' symbols that names kernel `name` (see the module doc)."""
    if name.isidentifier() and name.isascii():
        return name
    return "__hipcpu_x_" + "".join(
        c if c.isalnum() and c.isascii() else f"_{ord(c):02x}" for c in name
    )


def find_dynamic_shared(preprocessed: str) -> list[str]:
    """Symbols of the `extern __shared__ T name[];` arrays: the name at global scope (and in
    a kernel there), the Itanium-mangled qualified name inside a namespace (`_ZN2ns1sE`: a
    variable's mangling carries no type)."""
    names: dict[str, None] = {}
    for at, _, namespaces in _namespaces(preprocessed, SHARED_MARKER):
        start = _declaration_start(preprocessed, at)
        end = preprocessed.find(";", at)
        if _EXTERN.search(preprocessed, start, at) and end >= 0:
            match = _ARRAY_NAME.search(preprocessed, at, end)
            if match:
                parts = [p for n in namespaces for p in n.split("::") if p] + [match.group(1)]
                mangled = "".join(f"{len(p)}{p}" for p in parts)
                names[match.group(1) if len(parts) == 1 else f"_ZN{mangled}E"] = None
    return list(names)


_EXPORT = 'extern "C" __attribute__((visibility("default"), used)) int'


def entry_points(kernels: list[str], dynamic_shared: list[str]) -> str:
    """The code appended to the program: the executor and one entry point per kernel (a
    qualified name or a canonical name expression; one entry per symbol)."""
    lines = ["", '#line 1 "<hip-ffi cpu entry points>"', '#include "hip_cpu_executor.h"']
    symbols = {entry_symbol(name): name for name in reversed(kernels)}
    for symbol, name in reversed(symbols.items()):
        lines += [
            f"static constexpr auto __hipcpu_fn_{symbol} = &{name};",
            f"{_EXPORT} __hipcpu_launch_{symbol}(const unsigned long long* s) "
            f"{{ return ::hipcpu::launch<__hipcpu_fn_{symbol}>(s); }}",
            f"{_EXPORT} __hipcpu_describe_{symbol}(unsigned long long* out, int capacity) "
            f"{{ return ::hipcpu::describe<__hipcpu_fn_{symbol}>(out, capacity); }}",
        ]
    lines += [f"HIPCPU_DYNAMIC_SHARED({name})" for name in dynamic_shared]
    return "\n".join(lines) + "\n"
