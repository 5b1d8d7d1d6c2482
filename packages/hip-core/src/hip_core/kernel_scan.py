"""The `__global__` functions of a HIP source as written: qualified name, linkage, template
parameters and parameter declarations, read without a compiler.

What it reads: comments, string literals and preprocessor lines are blanked first (a kernel in
a `#define` body is not one until expanded: hip_runtime's kernel_sources expands its type
lists before hip-core reads a source); namespaces (named, nested `a::b`, inline, anonymous)
qualify a kernel's name, `extern "C"` (on the declaration or around it) gives it C linkage,
and a kernel inside a class or a function body is skipped. Parameter lists are split at the
commas outside brackets, so `Pair<int, 3> p` is one parameter.

Name expressions (`k<64>`, `ns::k`) are compared in `canonical` form: spaces dropped except
between two words, so `k< 64 >` and `k<64>` are one name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hip_ffi.rtc import closing_bracket, scopes

_BLANKED = re.compile(
    r"//[^\n]*|/\*.*?\*/"  # comments
    r'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''  # literals
    r"|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*",  # preprocessor lines with their continuations
    re.S | re.M,
)
# __launch_bounds__'s arguments may hold one level of parentheses: `((A) * (B), 2)`.
_BOUNDS = r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)"
_HEAD = re.compile(
    rf"__global__\s+(?:(?:static|inline|{_BOUNDS})\s*)*void\s+"
    rf"(?:{_BOUNDS}\s*)?([A-Za-z_]\w*)\s*\("
)
_TEMPLATE = re.compile(r"\btemplate\s*<")
_EXTERN_C = re.compile(r'\bextern\s*"C"')
_WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class KernelDecl:
    """One `__global__` function: `name` qualified (`ns::k`), `params` as written,
    `template` its template parameters' names (empty for a plain function) and their
    defaults, `c_linkage` whether it is `extern "C"`."""

    name: str
    params: tuple[str, ...]
    template: tuple[str, ...] = ()
    defaults: tuple[str | None, ...] = ()
    c_linkage: bool = False


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    if text == '"C"':  # `extern "C"` must still read as such
        return text
    if text[0] in "\"'":
        return text[0] + " " * (len(text) - 2) + text[-1]
    return re.sub(r"[^\n]", " ", text)


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside (), <>, [] and {}; parts stripped, empties dropped."""
    if not any(c in text for c in "(<[{"):  # the common case: no brackets to respect
        return [p.strip() for p in text.split(",") if p.strip()]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _template_params(prefix: str) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    match = _TEMPLATE.search(prefix)
    if match is None:
        return (), ()
    end = closing_bracket(prefix, match.end() - 1, "<", ">")
    names, defaults = [], []
    for part in split_top_level(prefix[match.end() : end]):
        declared, _, default = part.partition("=")
        words = _WORD.findall(declared)
        names.append(words[-1] if words else "")
        defaults.append(default.strip() or None)
    return tuple(names), tuple(defaults)


@functools.lru_cache(maxsize=128)
def scan_kernels(source: str) -> Mapping[str, KernelDecl]:
    """Every `__global__` function at namespace scope, by qualified name (first one wins).

    Cached per source text (a Program and the Module it loads read the same source; a large
    per-dtype source takes tens of milliseconds): the mapping is read-only."""
    code = _BLANKED.sub(_blank, source)
    found: dict[str, KernelDecl] = {}
    for at, _, stack, extern_c in scopes(code, ("__global__",)):
        head = _HEAD.match(code, at)
        if head is None or None in stack:
            continue
        start = max(code.rfind(c, 0, at) for c in ";{}") + 1
        prefix = code[start:at]
        close = closing_bracket(code, head.end() - 1, "(", ")")
        params = tuple(p for p in split_top_level(code[head.end() : close]) if p != "void")
        template, defaults = _template_params(prefix)
        qualified = "".join(s for s in stack if s) + head.group(1)
        linkage = extern_c or bool(_EXTERN_C.search(prefix))
        found.setdefault(qualified, KernelDecl(qualified, params, template, defaults, linkage))
    return MappingProxyType(found)


def canonical(name: str) -> str:
    """A name expression without `&` and spaces (one kept between two words)."""
    text = name.strip().removeprefix("&").strip()
    return re.sub(r"\s+", lambda m: " " if _inner(m) else "", text)


def _inner(match: re.Match[str]) -> bool:
    text, start, end = match.string, match.start(), match.end()
    return start > 0 and end < len(text) and _is_word(text[start - 1]) and _is_word(text[end])


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def template_arguments(name: str) -> tuple[str, tuple[str, ...]]:
    """(`ns::k`, ("float", "64")) for `ns::k<float, 64>`; (`ns::k`, ()) for a plain name."""
    text = canonical(name)
    if not text.endswith(">") or "<" not in text:
        return text, ()
    opening = text.index("<")
    return text[:opening], tuple(split_top_level(text[opening + 1 : -1]))
