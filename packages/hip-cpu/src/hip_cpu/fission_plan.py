"""A kernel's body as fission.py splits it: stretches of statements between barriers, and the
control statements and inlined device-function calls that hold barriers.

A statement that cannot wait belongs to a stretch (`Run`), which fission.py turns into a loop
over the block's threads. A statement that can is one of:
- `__syncthreads();` (`Barrier`): the end of one stretch;
- a compound statement (`Scope`), `for`, `while`, `do` (`Loop`) or `if` (`Branch`): its
  condition decides for the whole block whether a barrier is reached, so it runs once for the
  block; it is *uniform* when it reads nothing that differs between threads (a kernel argument,
  blockDim, a uniform loop variable...), else each thread evaluates it and all must agree;
- a call of a `void` device function defined in the program (`Inline`): its body is split too.
Anything else that waits raises Unsplittable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hip_cpu import fission_ast
from hip_cpu.fission_ast import (
    Functions,
    Unsplittable,
    body_of,
    children,
    kind,
    modified_refs,
    tokens,
    walk,
)

#: How a statement that waits starts in the program's text (else a macro wrote it: the split
#: edits the text, which then holds only the macro's use).
_SPELLED = {"COMPOUND_STMT": b"{", "FOR_STMT": b"for", "WHILE_STMT": b"while", "DO_STMT": b"do",
            "IF_STMT": b"if"}  # fmt: skip


@dataclass
class Instance:
    """The kernel (number 0) or one inlined call of a device function."""

    number: int
    function: Any
    parent: Instance | None
    # Lines at an inlined function's top that give its names the meaning they have where it is
    # defined: `using namespace ns;` for its namespaces, `using T = float;` for its template.
    preamble: list[str] = field(default_factory=list)


@dataclass
class Run:
    statements: list[Any]
    instance: Instance
    header: bool = False  # a loop's init or increment: terminated with `;` when emitted


@dataclass
class Barrier:
    pass


@dataclass
class Scope:
    items: list[Any]


@dataclass
class Condition:
    cursor: Any
    text: str
    uniform: bool
    instance: Instance


@dataclass
class Loop:
    form: str  # "for", "while", "do"
    header: str  # a uniform for's text between its parentheses
    init: Run | None
    condition: Condition | None
    increment: Run | None
    items: list[Any]
    uniform: bool


@dataclass
class Branch:
    condition: Condition
    then: list[Any]
    otherwise: list[Any]


@dataclass
class Inline:
    call: Any
    caller: Instance
    instance: Instance
    arguments: list[tuple[Any, str]]  # (the parameter, the argument's text)
    items: list[Any]


_UNIFORM_GLOBALS_EXCLUDED = {"threadIdx"}
#: What a name may refer to in a uniform condition besides variables and parameters.
_SHARED_KINDS = {"FIELD_DECL", "ENUM_CONSTANT_DECL", "FUNCTION_DECL", "CXX_METHOD",
                 "NON_TYPE_TEMPLATE_PARAMETER", "TEMPLATE_NON_TYPE_PARAMETER"}  # fmt: skip


class Planner:
    """Builds the items of a kernel; `src` is the main file's bytes."""

    def __init__(self, unit: Any, functions: Functions, src: bytes, main_file: str) -> None:
        self.unit = unit
        self.functions = functions
        self.src = src
        self.main_file = main_file
        self.instances: list[Instance] = []
        self.uniform_vars: set[str] = set()  # USRs of uniform for-loop variables
        self.kernel_params: set[str] = set()

    def text(self, start: int, end: int) -> str:
        return self.src[start:end].decode()

    # ---- entry ------------------------------------------------------------------------------
    def kernel(self, function: Any) -> tuple[Instance, list[Any]]:
        params = list(function.get_arguments())
        self.kernel_params = {p.get_usr() for p in params}
        body = self._spelled_body(function)
        for node in walk(body):
            if kind(node) in ("GOTO_STMT", "LABEL_STMT", "INDIRECT_GOTO_STMT"):
                raise Unsplittable("it uses goto")
        if modified_refs(self.unit, body, self.kernel_params):
            raise Unsplittable("it changes one of its arguments (shared by the block's threads)")
        instance = self._instance(function, None)
        return instance, self.statements(children(body), instance)

    def _spelled_body(self, function: Any) -> Any:
        """`function`'s body, written out in the program's text (the split edits that text):
        not one that a macro expands to, whose extent is the macro's use."""
        body = body_of(function)
        start, end = body.extent.start.offset, body.extent.end.offset
        if self.src[start : start + 1] != b"{" or self.src[end - 1 : end] != b"}":
            raise Unsplittable(f"{function.spelling}'s body comes from a macro")
        return body

    def _instance(self, function: Any, parent: Instance | None) -> Instance:
        instance = Instance(len(self.instances), function, parent)
        self.instances.append(instance)
        return instance

    # ---- statements -------------------------------------------------------------------------
    def statements(self, cursors: list[Any], instance: Instance) -> list[Any]:
        items: list[Any] = []
        run: list[Any] = []
        for cursor in cursors:
            if not self.functions.contains_wait(cursor):
                run.append(cursor)
                continue
            if run:
                items.append(Run(run, instance))
                run = []
            items.append(self.waiting(cursor, instance))
        if run:
            items.append(Run(run, instance))
        return items

    def waiting(self, cursor: Any, instance: Instance) -> Any:
        k = kind(cursor)
        start = cursor.extent.start.offset
        spelled = _SPELLED.get(k, b"")
        if self.src[start : start + len(spelled)] != spelled:
            raise Unsplittable(f"it waits in a macro's expansion, line {cursor.location.line}")
        if self.functions.is_barrier(cursor) and not children_args(cursor):
            return Barrier()
        if k == "COMPOUND_STMT":
            return Scope(self.statements(children(cursor), instance))
        if k == "FOR_STMT":
            return self.for_loop(cursor, instance)
        if k in ("WHILE_STMT", "DO_STMT"):
            return self.while_loop(cursor, instance)
        if k == "IF_STMT":
            return self.branch(cursor, instance)
        if k == "CALL_EXPR":
            return self.inline(cursor, instance)
        raise Unsplittable(f"it waits inside a {k.lower()} at line {cursor.location.line}")

    def _body(self, cursor: Any, instance: Instance) -> list[Any]:
        if kind(cursor) == "COMPOUND_STMT":
            return self.statements(children(cursor), instance)
        return self.statements([cursor], instance)

    def _parentheses(self, cursor: Any) -> tuple[int, int, list[tuple[int, int]]]:
        """The offsets just inside the statement's first parentheses, and the pieces between
        its top-level semicolons."""
        depth, start, pieces, piece = 0, -1, [], -1
        for token in tokens(self.unit, cursor):
            s, offset = str(token.spelling), token.extent.start.offset
            if s in ("(", "[", "{"):
                depth += 1
                if depth == 1 and s == "(" and start < 0:
                    start = piece = token.extent.end.offset
            elif s in (")", "]", "}"):
                depth -= 1
                if depth == 0 and start >= 0:
                    pieces.append((piece, offset))
                    return start, offset, pieces
            elif s == ";" and depth == 1 and start >= 0:
                pieces.append((piece, offset))
                piece = token.extent.end.offset
        raise Unsplittable(f"no parentheses found at line {cursor.location.line}")

    def _within(self, cursor: Any, span: tuple[int, int]) -> bool:
        return bool(span[0] <= cursor.extent.start.offset < span[1])

    def for_loop(self, cursor: Any, instance: Instance) -> Loop:
        start, end, pieces = self._parentheses(cursor)
        if len(pieces) != 3:
            raise Unsplittable(f"a range-for that waits, line {cursor.location.line}")
        parts = children(cursor)
        body = parts[-1]
        init_cursor = next((c for c in parts[:-1] if self._within(c, pieces[0])), None)
        cond_cursor = next((c for c in parts[:-1] if self._within(c, pieces[1])), None)
        inc_cursor = next((c for c in parts[:-1] if self._within(c, pieces[2])), None)
        declared = []
        if init_cursor is not None and kind(init_cursor) == "DECL_STMT":
            declared = [v.get_usr() for v in children(init_cursor) if kind(v) == "VAR_DECL"]
        header_cursors = [c for c in (init_cursor, cond_cursor, inc_cursor) if c is not None]
        uniform = all(self.uniform(c, instance, set(declared)) for c in header_cursors)
        if uniform and declared and modified_refs(self.unit, body, set(declared)):
            uniform = False
        if uniform:
            self.uniform_vars.update(declared)
        condition = None
        if cond_cursor is not None:
            condition = Condition(cond_cursor, self.text(*pieces[1]), uniform, instance)
        return Loop(
            "for",
            self.text(start, end),
            Run([init_cursor], instance, header=True) if init_cursor is not None else None,
            condition,
            Run([inc_cursor], instance, header=True) if inc_cursor is not None else None,
            self._body(body, instance),
            uniform,
        )

    def while_loop(self, cursor: Any, instance: Instance) -> Loop:
        parts = children(cursor)
        form = "while" if kind(cursor) == "WHILE_STMT" else "do"
        body, cond = (parts[1], parts[0]) if form == "while" else (parts[0], parts[1])
        if kind(cond) in ("VAR_DECL", "DECL_STMT"):
            raise Unsplittable(f"a declaration in a condition, line {cursor.location.line}")
        uniform = self.uniform(cond, instance, set())
        text = self.text(cond.extent.start.offset, cond.extent.end.offset)
        return Loop(form, "", None, Condition(cond, text, uniform, instance), None,
                    self._body(body, instance), uniform)  # fmt: skip

    def branch(self, cursor: Any, instance: Instance) -> Branch:
        spelled = [str(t.spelling) for t in tokens(self.unit, cursor)][:2]
        if spelled[1:] == ["constexpr"]:
            raise Unsplittable(f"an if constexpr that waits, line {cursor.location.line}")
        start, end, pieces = self._parentheses(cursor)
        parts = children(cursor)
        if len(pieces) != 1 or any(kind(p) in ("VAR_DECL", "DECL_STMT") for p in parts):
            raise Unsplittable(f"a declaration in an if's condition, line {cursor.location.line}")
        cond = parts[0]
        uniform = self.uniform(cond, instance, set())
        condition = Condition(cond, self.text(start, end), uniform, instance)
        otherwise = self._body(parts[2], instance) if len(parts) > 2 else []
        return Branch(condition, self._body(parts[1], instance), otherwise)

    def inline(self, call: Any, caller: Instance) -> Inline:
        function = call.referenced
        definition = self.functions.definition(function) if function is not None else None
        if definition is None or function.result_type.spelling != "void":
            raise Unsplittable(f"it waits in a call it cannot inline, line {call.location.line}")
        file = definition.location.file
        if file is None or file.name != self.main_file:
            raise Unsplittable(f"{function.spelling} is not defined in the program's file")
        if any(kind(n) == "RETURN_STMT" for n in walk(self._spelled_body(definition))):
            raise Unsplittable(f"{function.spelling} returns early (inlined: not yet)")
        for node in walk(body_of(definition)):
            if kind(node) in ("GOTO_STMT", "LABEL_STMT"):
                raise Unsplittable(f"{function.spelling} uses goto")
        instance = self._instance(definition, caller)
        instance.preamble = [*_namespaces(definition), *self._template_aliases(function)]
        params = list(definition.get_arguments())
        given = list(call.get_arguments())
        arguments: list[tuple[Any, str]] = []
        for i, param in enumerate(params):
            if i < len(given):
                a = given[i]
                arguments.append((param, self.text(a.extent.start.offset, a.extent.end.offset)))
            else:
                arguments.append((param, self._default(param, function)))
        return Inline(
            call,
            caller,
            instance,
            arguments,
            self.statements(children(body_of(definition)), instance),
        )

    def _default(self, param: Any, function: Any) -> str:
        spelled = [str(t.spelling) for t in tokens(self.unit, param)]
        if "=" not in spelled:
            raise Unsplittable(f"a default argument of {function.spelling} not found")
        return " ".join(spelled[spelled.index("=") + 1 :])

    def _template_aliases(self, function: Any) -> list[str]:
        count = function.get_num_template_arguments()
        if count <= 0:
            return []
        pattern = fission_ast.lib().clang_getSpecializedCursorTemplate(function)
        names = [c for c in children(pattern) if kind(c).startswith("TEMPLATE_")]
        if len(names) != count:
            raise Unsplittable(f"template parameters of {function.spelling} not matched")
        aliases = []
        for i, name in enumerate(names):
            if kind(name) == "TEMPLATE_TYPE_PARAMETER":
                aliases.append(
                    f"using {name.spelling} = {function.get_template_argument_type(i).spelling};"
                )
            elif kind(name) == "TEMPLATE_NON_TYPE_PARAMETER":
                value = function.get_template_argument_value(i)
                aliases.append(f"constexpr {name.type.spelling} {name.spelling} = {value};")
            else:
                raise Unsplittable(f"a template template parameter of {function.spelling}")
        return aliases

    # ---- uniformity -------------------------------------------------------------------------
    def uniform(self, cursor: Any, instance: Instance, own: set[str]) -> bool:
        """Whether `cursor` reads only what is the same for every thread of the block."""
        for node in walk(cursor):
            k = kind(node)
            if k == "CALL_EXPR":
                target = node.referenced
                if target is None or not (
                    target.location.is_in_system_header or self.functions.is_ours(target)
                ):
                    return False
            if k not in ("DECL_REF_EXPR", "MEMBER_REF_EXPR"):
                continue
            target = node.referenced
            if target is None:
                return False
            tk = kind(target)
            usr = target.get_usr()
            if tk == "PARM_DECL":
                if instance.number != 0 or usr not in self.kernel_params:
                    return False
            elif tk == "VAR_DECL":
                if target.spelling in _UNIFORM_GLOBALS_EXCLUDED:
                    return False
                parent = target.semantic_parent
                is_global = parent is not None and kind(parent) in (
                    "TRANSLATION_UNIT", "NAMESPACE", "LINKAGE_SPEC")  # fmt: skip
                constant = target.type.is_const_qualified() and _constexpr(self.unit, target)
                if not (is_global or usr in own or usr in self.uniform_vars or constant):
                    return False
            elif tk not in _SHARED_KINDS:
                return False
        return True


def children_args(call: Any) -> list[Any]:
    return list(call.get_arguments())


def _constexpr(unit: Any, variable: Any) -> bool:
    return any(str(t.spelling) == "constexpr" for t in tokens(unit, variable))


def _namespaces(function: Any) -> list[str]:
    """`using namespace a; using namespace a::b;` for a function defined in namespace a::b
    (inlined into a kernel elsewhere, its unqualified names must still find a's and b's)."""
    names: list[str] = []
    parent = function.semantic_parent
    while parent is not None and kind(parent) != "TRANSLATION_UNIT":
        if kind(parent) == "NAMESPACE" and parent.spelling:  # (an anonymous one's names are
            names.insert(0, parent.spelling)  # visible around it: nothing to name)
        parent = parent.semantic_parent
    return [f"using namespace {'::'.join(names[: i + 1])};" for i in range(len(names))]
