"""Bookkeeping of fission.py's split: a kernel's variables (which live across a barrier, which
move to the kernel's top), a declaration statement taken apart into its declarators and
rewritten, and the statements a stretch's `return`, `break` and `continue` belong to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hip_cpu.fission_ast import Unsplittable, children, kind, tokens
from hip_cpu.fission_plan import Instance


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
    def thread_local(self) -> bool:
        """A `__shared__` one (a thread_local; `extern __shared__ float s[]` too)."""
        return bool(self.cursor.tls_kind.name != "NONE")

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


def declarators(unit: Any, src: bytes, statement: Any) -> list[tuple[Any, str, str]]:
    """(variable, its declaration alone, its initializer) for each variable `statement`
    declares: `int a = 1, *b;` gives `int a = 1` and `int *b`."""
    variables = [c for c in children(statement) if kind(c) == "VAR_DECL"]
    start = statement.extent.start.offset
    commas, depth = [], 0
    for token in tokens(unit, statement):
        text = str(token.spelling)
        depth += (text in ("(", "[", "{", "<") and 1) or 0
        depth -= (text in (")", "]", "}", ">") and 1) or 0
        if text == "," and depth == 0:
            commas.append(token.extent.start.offset)
    if len(commas) != len(variables) - 1:
        raise Unsplittable(f"the declarators at line {statement.location.line} not found")
    stop = statement_end(src, statement)
    if src[stop - 1 : stop] == b";":
        stop -= 1
    bounds = [start, *[c + 1 for c in commas]]
    ends = [*commas, stop]
    first = variables[0].location.offset
    prefix = src[start:first].decode().rstrip()
    while prefix and prefix[-1] in "*&":  # `int *a, b`: the `*` is a's alone
        prefix = prefix[:-1].rstrip()
    out = []
    for i, var in enumerate(variables):
        begin = bounds[i] if i else len(prefix.encode()) + start
        declarator = src[begin : ends[i]].decode().strip()
        name_end = var.location.offset + len(var.spelling.encode())
        out.append(
            (var, f"{prefix} {declarator}", initializer_of(src[name_end : ends[i]].decode()))
        )
    return out


def statement_end(src: bytes, cursor: Any) -> int:
    """The end of the statement `cursor` starts, its `;` included."""
    end = int(cursor.extent.end.offset)
    at = end
    while at < len(src) and src[at : at + 1] in (b" ", b"\t", b"\n", b"\r"):
        at += 1
    if src[at : at + 1] == b";" and (end == 0 or src[end - 1 : end] != b";"):
        return at + 1
    return end


def initialization(v: Variable) -> str:
    """Thread t's element of promoted `v` takes the declaration's initial value."""
    name, t, rest = v.cursor.spelling, f"__hipcpu_T{v.number}", v.initializer
    if not rest:
        canonical = v.cursor.type.get_canonical().kind.name
        return f"::new ((void*)&{name}) {t};" if canonical == "RECORD" else ";"
    array = v.cursor.type.get_canonical().kind.name == "CONSTANTARRAY"
    if rest.startswith("=") and not rest[1:].lstrip().startswith("{") and not array:
        return f"{name} = {rest[1:].strip()};"
    return (f"{{ {t} __hipcpu_init {rest}; "
            f"std::memcpy((void*)&{name}, (const void*)&__hipcpu_init, sizeof({t})); }}"
    )  # fmt: skip
