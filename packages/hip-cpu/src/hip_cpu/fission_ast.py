"""What fission.py reads from a program's syntax tree (libclang): its kernels, where they wait,
and how their variables are used.

The program is parsed the way the cpu compiler builds it (the prelude force-included, the same
-D/-I), with libclang from the `libclang` wheel, the host compiler's own builtin headers standing
in for clang's (the wheel has none). Nothing here writes code: it answers questions about
cursors, and raises Unsplittable for what fission does not handle.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

try:  # optional: without it every kernel runs unsplit (as fibers)
    import clang.cindex as cindex
except ImportError:  # pragma: no cover - the wheel is part of the cpu extra
    cindex = None

#: The prelude's functions that wait for other threads (by name; their bodies are not read).
_WAIT_NAMES = frozenset(
    {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or",
     "__syncwarp", "__activemask", "block_barrier", "warp_exchange", "grid_sync", "convert",
     "sync", "barrier_wait"}
)  # fmt: skip
_WAIT_PREFIXES = ("__shfl", "__any", "__all", "__ballot", "__match", "__reduce", "shfl", "any",
                  "all", "ballot", "match_")  # fmt: skip

#: The prelude's per-thread and per-block indices (thread_locals the executor sets).
BUILTIN_INDICES = ("threadIdx", "blockIdx", "blockDim", "gridDim")
#: Functions whose definitions libclang does not see (the executor's, compiled after the
#: program) that read threadIdx: a failed assert(), __trap() and abort() name the thread.
_READ_THREAD_INDEX = frozenset(
    {"__assert_fail", "__assert_perror_fail", "__trap", "trapped", "abort"}
)
_FUNCTION_KINDS = frozenset(
    {"FUNCTION_DECL", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION",
     "FUNCTION_TEMPLATE"}
)  # fmt: skip


class Unsplittable(Exception):
    """A kernel fission leaves to the fibers; the message says why (HIP_FFI_CPU_SPLIT_LOG)."""


def lib() -> Any:
    """libclang's C functions (those the Python binding does not wrap)."""
    return cindex.conf.lib


def available() -> bool:
    return cindex is not None


@functools.cache
def _index() -> Any:
    # Without this, libclang's crash recovery installs LLVM's own SIGSEGV/SIGBUS handlers at
    # the first parse, over the runtime library's: a kernel's bad access after that killed the
    # process instead of failing the launch.
    os.environ.setdefault("LIBCLANG_DISABLE_CRASH_RECOVERY", "1")
    cindex.conf.lib.clang_toggleCrashRecovery(0)
    return cindex.Index.create()


def parse(path: Path, flags: list[str], include_dirs: list[str], compiler_include: str) -> Any:
    """The translation unit of `path` as the cpu compiler sees it; None if it has errors.
    `flags` come after the prelude's forced include: an `-include` among them follows it, as
    in the compiler's command (-D and -U apply before any -include either way)."""
    args = ["-x", "c++", "-std=c++17", *(f"-I{d}" for d in include_dirs)]
    args += ["-include", "hip_cpu_prelude.h", *flags, "-isystem", compiler_include]
    args += ["-Wno-everything"]
    unit = _index().parse(str(path), args=args)
    if any(d.severity >= cindex.Diagnostic.Error for d in unit.diagnostics):
        return None
    return unit


def kind(cursor: Any) -> str:
    return str(cursor.kind.name)


def children(cursor: Any) -> list[Any]:
    return list(cursor.get_children())


def walk(cursor: Any) -> Iterator[Any]:
    """`cursor` and everything under it, parents first."""
    yield cursor
    for child in cursor.get_children():
        yield from walk(child)


def qualified_name(cursor: Any) -> str:
    parts = [cursor.spelling]
    parent = cursor.semantic_parent
    while parent is not None and kind(parent) != "TRANSLATION_UNIT":
        if kind(parent) == "NAMESPACE":
            parts.append(parent.spelling)
        elif kind(parent) != "LINKAGE_SPEC":
            return ""  # a member function: never a kernel here
        parent = parent.semantic_parent
    return "::".join(reversed(parts))


def kernel_definitions(unit: Any, main_file: str, names: set[str]) -> dict[str, Any]:
    """The definitions in the main file of the non-template kernels named `names`."""
    found: dict[str, Any] = {}

    def visit(cursor: Any) -> None:
        for child in cursor.get_children():
            k = kind(child)
            if k in ("NAMESPACE", "LINKAGE_SPEC"):
                visit(child)
            elif k == "FUNCTION_DECL" and child.is_definition():
                file = child.location.file
                if file is not None and os.path.samefile(file.name, main_file):
                    name = qualified_name(child)
                    if name in names:
                        found[name] = child

    visit(unit.cursor)
    return found


def body_of(function: Any) -> Any:
    for child in function.get_children():
        if kind(child) == "COMPOUND_STMT":
            return child
    return None


def _in_our_headers(cursor: Any, include_dir: str) -> bool:
    file = cursor.location.file
    return file is not None and file.name.startswith(include_dir)


class Functions:
    """Which functions wait (a barrier, a warp operation) or read threadIdx, reached through
    their bodies."""

    def __init__(self, unit: Any, include_dir: str) -> None:
        self.unit = unit
        self.include_dir = include_dir
        self._waits: dict[str, bool] = {}
        self._reads: dict[str, bool] = {}

    def is_ours(self, function: Any) -> bool:
        """`function` is the prelude's (a built-in of device code)."""
        return _in_our_headers(function, self.include_dir)

    def is_barrier(self, call: Any) -> bool:
        """`call` is `__syncthreads()`."""
        target = call.referenced
        return (
            kind(call) == "CALL_EXPR"
            and call.spelling == "__syncthreads"
            and target is not None
            and _in_our_headers(target, self.include_dir)
        )

    def definition(self, function: Any) -> Any:
        """The definition of `function` with a body: for a template's specialization, the
        instantiated one (concrete types, resolved calls; the pattern's source offsets)."""
        definition = function.get_definition()
        if definition is not None and body_of(definition) is not None:
            return definition
        return None

    def waits(self, function: Any) -> bool:
        """Whether a call of `function` may wait for other threads."""
        if function is None:
            return False  # a dependent call in a template pattern: see fission.py's guard
        if _in_our_headers(function, self.include_dir):
            name = function.spelling
            return name in _WAIT_NAMES or name.startswith(_WAIT_PREFIXES)
        if function.location.is_in_system_header:
            return False
        return self._in_body(self._waits, function, self.contains_wait)

    def contains_wait(self, cursor: Any) -> bool:
        for node in walk(cursor):
            if kind(node) == "CALL_EXPR" and self.waits(node.referenced):
                return True
        return False

    def is_builtin_index(self, variable: Any) -> bool:
        """`variable` is the prelude's threadIdx, blockIdx, blockDim or gridDim."""
        return (
            variable is not None
            and kind(variable) == "VAR_DECL"
            and variable.spelling in BUILTIN_INDICES
            and _in_our_headers(variable, self.include_dir)
        )

    def calls_reading_thread_index(self, nodes: Iterable[Any]) -> bool:
        """Whether `nodes` (a stretch's, all of them) call a function that may read threadIdx
        (itself or through its calls): a split kernel then stores each thread's index where
        they read it."""
        return any(
            kind(node) == "CALL_EXPR" and self._reads_thread_index(node.referenced)
            for node in nodes
        )

    def _reads_thread_index(self, function: Any) -> bool:
        if function is None or kind(function) not in _FUNCTION_KINDS:
            return True  # through a pointer, or not resolved: it may
        if function.spelling in _READ_THREAD_INDEX:
            return True
        if function.location.is_in_system_header:
            return False  # threadIdx is the program's own static: no library can read it
        return self._in_body(self._reads, function, self._reads_in)

    def _reads_in(self, cursor: Any) -> bool:
        nodes = list(walk(cursor))
        return self.calls_reading_thread_index(nodes) or any(
            kind(n) == "DECL_REF_EXPR"
            and self.is_builtin_index(n.referenced)
            and n.referenced.spelling == "threadIdx"
            for n in nodes
        )

    def _in_body(
        self, memo: dict[str, bool], function: Any, found_in: Callable[[Any], bool]
    ) -> bool:
        """`found_in(body)` of `function`'s definition (False without one), worked out once
        per function; False while it is being worked out (a recursive call)."""
        key = function.get_usr() or f"{function.location.file}:{function.location.offset}"
        if key not in memo:
            memo[key] = False
            definition = self.definition(function)
            memo[key] = definition is not None and found_in(body_of(definition))
        return memo[key]


# ---- variables ------------------------------------------------------------------------------

_TRANSPARENT = {"UNEXPOSED_EXPR", "PAREN_EXPR"}


def tokens(unit: Any, cursor: Any) -> list[Any]:
    """The tokens of `cursor`'s extent, by file offsets (libclang gives none for an extent that
    starts with a macro, as `__shared__ float s[256];` does)."""
    start, end = cursor.extent.start, cursor.extent.end
    if start.file is None:
        return []
    first = cindex.SourceLocation.from_offset(unit, start.file, start.offset)
    last = cindex.SourceLocation.from_offset(unit, start.file, end.offset)
    return list(unit.get_tokens(extent=cindex.SourceRange.from_locations(first, last)))


def operator_of(unit: Any, cursor: Any) -> str:
    """The operator token of a binary or unary operator cursor."""
    parts = children(cursor)
    if kind(cursor) in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and parts:
        end = parts[0].extent.end.offset
        for token in tokens(unit, cursor):
            if token.extent.start.offset >= end:
                return str(token.spelling)
        return ""
    spelled = [str(t.spelling) for t in tokens(unit, cursor)]
    if spelled and spelled[0] in ("++", "--", "&", "*", "-", "!", "~", "+"):
        return spelled[0]
    return spelled[-1] if spelled and spelled[-1] in ("++", "--") else ""


def modified_refs(unit: Any, root: Any, targets: set[str]) -> set[str]:
    """Of the variables `targets` (by USR), those that code under `root` may change: assigned,
    incremented, address taken, or passed where a non-const reference binds (or to a call this
    cannot resolve)."""
    changed: set[str] = set()

    def visit(cursor: Any, parents: list[Any]) -> None:
        if kind(cursor) == "DECL_REF_EXPR":
            target = cursor.referenced
            usr = target.get_usr() if target is not None else ""
            if usr in targets and _changes(unit, cursor, parents, target):
                changed.add(usr)
        for child in cursor.get_children():
            visit(child, [*parents, cursor])

    visit(root, [])
    return changed


def _changes(unit: Any, ref: Any, parents: list[Any], variable: Any) -> bool:
    node = ref
    array = variable.type.get_canonical().kind.name in ("CONSTANTARRAY", "RECORD")
    for parent in reversed(parents):
        k = kind(parent)
        if k in _TRANSPARENT or (array and k in ("MEMBER_REF_EXPR", "ARRAY_SUBSCRIPT_EXPR")):
            node = parent
            continue
        if k in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR"):
            first = children(parent)[0]
            if first.extent.start.offset != node.extent.start.offset:
                return False
            op = operator_of(unit, parent)
            return k == "COMPOUND_ASSIGNMENT_OPERATOR" or op == "="
        if k == "UNARY_OPERATOR":
            return operator_of(unit, parent) in ("++", "--", "&")
        if k == "CALL_EXPR":
            return _binds_mutable_reference(parent, node)
        return False
    return False


def _binds_mutable_reference(call: Any, argument: Any) -> bool:
    function = call.referenced
    if function is None:
        return True
    arguments = list(call.get_arguments())
    for i, given in enumerate(arguments):
        if given.extent.start.offset == argument.extent.start.offset:
            params = list(function.get_arguments())
            if i >= len(params):
                return False  # a C variadic: by value
            t = params[i].type
            if t.kind.name == "LVALUEREFERENCE":
                return not t.get_pointee().is_const_qualified()
            return bool(t.kind.name == "RVALUEREFERENCE")
    return True  # the callee expression itself (a functor object): may be a mutable call
