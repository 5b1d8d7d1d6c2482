"""Bookkeeping of fission.py's split: a kernel's variables (which live across a barrier, which
move to the kernel's top), the initializer of a declarator, and the statements a stretch's
`return`, `break` and `continue` belong to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hip_ffi.platforms.cpu.fission_ast import kind
from hip_ffi.platforms.cpu.fission_plan import Instance


@dataclass
class Variable:
    key: tuple[int, str]
    cursor: Any
    instance: Instance
    contexts: set[int] = field(default_factory=set)
    declared_in: int = -1
    header: bool = False  # declared in a loop header: always per thread
    storage: bool = False  # __shared__, static, constexpr...
    param: bool = False  # an inlined function's parameter
    number: int = 0
    declaration: str = ""  # `float v = 0.0f` alone (of a statement that may declare several)
    initializer: str = ""  # `= 0.0f`, `{1, 2}`, `(a, b)`, or ""

    @property
    def promoted(self) -> bool:
        if self.storage:
            return False
        return self.param or self.header or bool(self.contexts - {self.declared_in})

    @property
    def hoisted(self) -> bool:
        return self.storage and bool(self.contexts - {self.declared_in})


def initializer_of(after_name: str) -> str:
    """What follows a declarator's name and array bounds: its initializer, or ""."""
    text = after_name.strip()
    while text.startswith("["):
        depth = 0
        for i, c in enumerate(text):
            depth += c == "["
            depth -= c == "]"
            if depth == 0:
                text = text[i + 1 :].strip()
                break
        else:
            return text
    return text


def walk_flow(cursor: Any, inside_loop: bool = False) -> Any:
    """(node, inside a loop or switch of the stretch) for the nodes under `cursor`, lambdas'
    bodies left out."""
    yield cursor, inside_loop
    k = kind(cursor)
    if k == "LAMBDA_EXPR":
        return
    nested = inside_loop or k in ("FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT",
                                  "CXX_FOR_RANGE_STMT")  # fmt: skip
    for child in cursor.get_children():
        yield from walk_flow(child, nested)
