"""Kernels split at their barriers: the cpu platform's fast path for `__syncthreads()`.

Run as fibers (hip_cpu_sched.h), every barrier costs each GPU thread a fiber switch. Split,
a kernel runs a block as loops over its threads: the statements between two barriers become
one loop (`for t in threads: run them as thread t`), and the barrier is the end of that loop.
This is the transformation OpenCL CPU runtimes make on compiled code (pocl's "work-item
loops"); here it is made on the source, before the host compiler sees it, from libclang's
syntax tree of the program (fission_ast.py, fission_plan.py):

- a variable that lives across a barrier becomes an array with one element per thread (its
  uses read `name`, a reference to thread t's element); `__shared__`, `static` and
  `constexpr` ones move to the top of the kernel, once per block;
- a `for`/`while`/`if` that holds a barrier runs once per block; its condition is evaluated
  once when it reads only what every thread shares, else by every thread, which must agree
  (a launch failure says where they do not: a barrier in divergent code);
- a `void` device function that waits is inlined and split in turn; `return` in the kernel
  ends the thread (it skips the later loops);
- the executor calls a split kernel once per block (hip_cpu_fission.h).

What is not handled leaves the kernel as it is (run as fibers): warp operations, a barrier
inside an expression, goto, a device function that returns a value and waits, ... A split
that does not compile is dropped too: compiler.py builds the program again unsplit.
HIP_FFI_CPU_SPLIT=0 turns splitting off; =log prints why each kernel was or was not split.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from hip_cpu import fission_ast, fission_threads
from hip_cpu.fission_ast import (
    Functions,
    Unsplittable,
    children,
    kind,
    tokens,
    walk,
)
from hip_cpu.fission_plan import (
    Barrier,
    Branch,
    Condition,
    Inline,
    Instance,
    Loop,
    Planner,
    Run,
    Scope,
)
from hip_cpu.fission_vars import (
    Variable,
    declarators,
    initialization,
    statement_end,
    walk_flow,
)

ENV = "HIP_FFI_CPU_SPLIT"
_LIBCLANG = threading.Lock()
_STORAGE_WORDS = ("__shared__", "static", "thread_local", "constexpr", "extern")
_TRUE = "static constexpr bool value = true;"
_BAD_SPELLINGS = ("lambda", "auto", "type-parameter", "(anonymous", "(unnamed")


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0" and fission_ast.available()


def logging() -> bool:
    return os.environ.get(ENV) == "log"


def split_program(
    source: Path, given_name: str, kernels: list[str], flags: list[str], include_dirs: list[str],
    compiler_include: str, include_dir: str,
) -> tuple[str, list[str], list[str]]:  # fmt: skip
    """(the program with its splittable kernels split, their names, why others were not).
    One program at a time in a process: libclang's index is shared, and it is not safe for
    two threads at once (ctypes lets go of the GIL in each call). The host compiler's run,
    the long part of a build, is not held up."""
    src = source.read_bytes()
    with _LIBCLANG:
        unit = fission_ast.parse(source, flags, include_dirs, compiler_include)
        edits, split, notes = _split_kernels(unit, src, source, given_name, kernels, include_dir)
    out = src
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text.encode() + out[end:]
    if logging():
        print("\n".join(f"hip-ffi cpu split: {n}" for n in notes), file=sys.stderr)
    return out.decode(), split, notes


def _split_kernels(
    unit: Any, src: bytes, source: Path, given_name: str, kernels: list[str], include_dir: str
) -> tuple[list[tuple[int, int, str]], list[str], list[str]]:
    """(the edits that split the kernels of `unit` that can be, their names, notes); `unit`
    None: libclang could not parse the program."""
    edits: list[tuple[int, int, str]] = []
    split: list[str] = []
    if unit is None:
        return edits, split, ["libclang could not parse the program"]
    functions = Functions(unit, include_dir)
    notes: list[str] = []
    for name, function in fission_ast.kernel_definitions(unit, str(source), set(kernels)).items():
        body = fission_ast.body_of(function)
        if body is None or not functions.contains_wait(body):
            continue
        try:
            planner = Planner(unit, functions, src, str(source))
            instance, items = planner.kernel(function)
            text = _Writer(planner, given_name).kernel(instance, items)
        except Unsplittable as why:
            notes.append(f"{name}: runs unsplit: {why}")
            continue
        edits.append((body.extent.start.offset, body.extent.end.offset, text))
        split.append(name)
        notes.append(f"{name}: split at its barriers")
    return edits, split, notes


def trait_lines(names: list[str]) -> str:
    """The declarations that make the executor call the split kernels once per block."""
    return "".join(
        f"template <> struct hipcpu::runs_blocks<&{name}> {{ {_TRUE} }};\n" for name in names
    )


def _declares_types_only(statement: Any) -> bool:
    """`statement` declares types (enum, typedef, using, struct), no variable."""
    return all(kind(c) != "VAR_DECL" for c in children(statement))


class _Writer:
    """Writes one split kernel's body."""

    def __init__(self, planner: Planner, given_name: str) -> None:
        self.p = planner
        self.unit = planner.unit
        self.file = given_name
        self.variables: dict[tuple[int, str], Variable] = {}
        self.context = 0
        self.labels = 0
        self.returns = False
        self.types: list[tuple[Instance, int, str]] = []  # (owner, offset, declaration)

    # ---- variables --------------------------------------------------------------------------
    def _local(self, target: Any, instance: Instance) -> tuple[int, str] | None:
        if target is None or kind(target) not in ("VAR_DECL", "PARM_DECL"):
            return None
        usr = target.get_usr()
        if usr in self.p.uniform_vars:
            return None
        if kind(target) == "PARM_DECL" and instance.number == 0:
            return None  # the kernel's own arguments: shared, never changed (Planner.kernel)
        # (a block-scope `extern __shared__ float s[];` has the enclosing namespace or linkage
        # spec as its semantic parent, the function as its lexical one)
        if instance.function not in (target.semantic_parent, target.lexical_parent):
            return None
        return (instance.number, usr)

    def _known(self, target: Any, instance: Instance) -> Variable | None:
        """The variable recorded for `target` in `instance`, if any."""
        key = self._local(target, instance)
        return None if key is None else self.variables.get(key)

    def _variable(self, target: Any, instance: Instance) -> Variable | None:
        key = self._local(target, instance)
        if key is None:
            return None
        if key not in self.variables:
            self.variables[key] = Variable(key, target, instance, number=len(self.variables))
        return self.variables[key]

    def _scan(self, cursors: list[Any], instance: Instance, context: int, top: list[Any]) -> None:
        """Record the uses in `cursors` (context `context`); `top`: its top-level statements."""
        for cursor in cursors:
            for node in walk(cursor):
                k = kind(node)
                if k in ("DECL_REF_EXPR", "VAR_DECL"):
                    v = self._variable(node.referenced if k == "DECL_REF_EXPR" else node, instance)
                    if v is not None:
                        v.contexts.add(context)
                        if k == "VAR_DECL":
                            v.declared_in = context
        for statement in top:
            if kind(statement) != "DECL_STMT":
                continue
            if _declares_types_only(statement):  # moved to the top: any stretch may use them
                start, end = statement.extent.start.offset, statement_end(self.p.src, statement)
                self.types.append((instance, start, self.p.text(start, end)))
                continue
            words = {str(t.spelling) for t in tokens(self.unit, statement)}
            for var, declaration, initializer in declarators(self.unit, self.p.src, statement):
                v = self._variable(var, instance)
                if v is not None:
                    v.declared_in = context
                    v.contexts.add(context)
                    v.declaration, v.initializer = declaration, initializer
                    v.storage = bool(words & set(_STORAGE_WORDS)) or (
                        var.tls_kind.name != "NONE"
                        or var.storage_class.name in ("STATIC", "EXTERN")
                    )

    def _collect(self, items: list[Any]) -> None:
        for item in items:
            if isinstance(item, Run):
                self.context += 1
                item_context = self.context
                item.context = item_context  # type: ignore[attr-defined]
                self._scan(item.statements, item.instance, item_context, item.statements)
                if item.header:
                    for var in walk(item.statements[0]):
                        v = self._known(var, item.instance)
                        if v is not None and kind(var) == "VAR_DECL":
                            v.header = True
            elif isinstance(item, Scope):
                self._collect(item.items)
            elif isinstance(item, Loop):
                self._collect([r for r in (item.init,) if r is not None])
                self._condition(item.condition)
                self._collect(item.items)
                self._collect([r for r in (item.increment,) if r is not None])
            elif isinstance(item, Branch):
                self._condition(item.condition)
                self._collect(item.then)
                self._collect(item.otherwise)
            elif isinstance(item, Inline):
                self.context += 1
                item.context = self.context  # type: ignore[attr-defined]
                self._scan([a for a in item.call.get_arguments()], item.caller, self.context, [])
                for param, _ in item.arguments:
                    v = self._variable(param, item.instance)
                    if v is None:
                        raise Unsplittable("an inlined parameter not recognised")
                    v.param = True
                    v.declared_in = self.context
                self._collect(item.items)

    def _condition(self, condition: Condition | None) -> None:
        if condition is not None and not condition.uniform:
            self.context += 1
            condition.context = self.context  # type: ignore[attr-defined]
            self._scan([condition.cursor], condition.instance, self.context, [])

    # ---- the kernel -------------------------------------------------------------------------
    def kernel(self, instance: Instance, items: list[Any]) -> str:
        self._collect(items)
        body = fission_ast.body_of(instance.function)
        self.returns = any(kind(n) == "RETURN_STMT" for n in walk(body))
        promoted = [v for v in self.variables.values() if v.promoted]
        lines = [
            "{",
            "::hipcpu::block& __hipcpu_b = ::hipcpu::fission_begin();",
            "const unsigned __hipcpu_n = __hipcpu_b.n;",
            "::hipcpu::fission_layout __hipcpu_l;",
            *fission_threads.KERNEL_LINES,
        ]
        for v in promoted:
            t = v.cursor.type
            spelled = t.spelling
            if t.kind.name in ("LVALUEREFERENCE", "RVALUEREFERENCE") or any(
                bad in spelled for bad in _BAD_SPELLINGS
            ):
                raise Unsplittable(f"{v.cursor.spelling} (type {spelled}) lives across a barrier")
            lines.append(f"using __hipcpu_T{v.number} = std::remove_cv_t<{spelled}>;")
            lines.append(
                f"const auto __hipcpu_o{v.number} = "
                f"__hipcpu_l.add<__hipcpu_T{v.number}>(__hipcpu_n);"
            )
        if self.returns:
            lines.append("const auto __hipcpu_od = __hipcpu_l.add<unsigned char>(__hipcpu_n);")
        lines.append("char* __hipcpu_m = ::hipcpu::fission_storage(__hipcpu_b, __hipcpu_l.bytes);")
        for v in promoted:
            lines.append(
                f"__hipcpu_T{v.number}* const __hipcpu_v{v.number} = "
                f"(__hipcpu_T{v.number}*)(__hipcpu_m + __hipcpu_o{v.number});"
            )
        if self.returns:
            lines.append(
                "unsigned char* const __hipcpu_done = (unsigned char*)(__hipcpu_m + __hipcpu_od);"
            )
            lines.append("std::memset(__hipcpu_done, 0, __hipcpu_n);")
        lines += self._hoisted(instance)
        lines += self.items(items)
        end = body.extent.end
        lines.append(f'#line {end.line} "{self.file}"')
        return "\n".join(lines) + "\n}"

    def _hoisted(self, instance: Instance) -> list[str]:
        """The declarations moved to the top of `instance`, in the program's order: its local
        types (enum, typedef, using, struct) and its variables that are not per thread; a
        thread_local one (`__shared__`) bound to a reference there, which the stretches use
        (fission_threads.py says why)."""
        found = [(start, text) for owner, start, text in self.types if owner is instance]
        for v in self.variables.values():
            if v.instance is instance and v.hoisted:
                text = v.declaration + ";"
                if v.thread_local:
                    name = v.cursor.spelling
                    text += f"\nauto& __hipcpu_h{v.number} = ::hipcpu::fission_opaque({name});"
                found.append((v.cursor.extent.start.offset, text))
        return [text for _, text in sorted(found, key=lambda entry: entry[0])]

    def items(self, items: list[Any]) -> list[str]:
        out: list[str] = []
        for item in items:
            if isinstance(item, Run):
                out += self.run(item)
            elif isinstance(item, Barrier):
                continue  # the end of the loop before it
            elif isinstance(item, Scope):
                out += ["{", *self.items(item.items), "}"]
            elif isinstance(item, Loop):
                out += self.loop(item)
            elif isinstance(item, Branch):
                condition = self.condition(item.condition, out)
                out += [f"if ({condition}) {{", *self.items(item.then), "} else {",
                        *self.items(item.otherwise), "}"]  # fmt: skip
            elif isinstance(item, Inline):
                out += self.inline(item)
        return out

    def loop(self, loop: Loop) -> list[str]:
        if loop.uniform and loop.form == "for":
            return [f"for ({loop.header}) {{", *self.items(loop.items), "}"]
        if loop.uniform and loop.condition is not None:
            text = loop.condition.text
            if loop.form == "while":
                return [f"while ({text}) {{", *self.items(loop.items), "}"]
            return ["do {", *self.items(loop.items), f"}} while ({text});"]
        out = ["{"]
        if loop.init is not None:
            out += self.run(loop.init)
        check: list[str] = []
        go = self.condition(loop.condition, check) if loop.condition is not None else "true"
        body = self.items(loop.items)
        if loop.form == "do":
            out += ["for (;;) {", *body]
            out += [*check, f"if (!({go})) break;", "}"]
        else:
            out += ["for (;;) {", *check, f"if (!({go})) break;", *body]
            if loop.increment is not None:
                out += self.run(loop.increment)
            out.append("}")
        out.append("}")
        return out

    def condition(self, condition: Condition, out: list[str]) -> str:
        """The C++ condition; for a per-thread one, appends the loop that evaluates it."""
        if condition.uniform:
            return condition.text
        self.labels += 1
        agree = f"__hipcpu_a{self.labels}"
        where = f"{self.file}:{condition.cursor.location.line}"
        body = (f"const bool __hipcpu_c = ({condition.text});\n"
                f"if ({agree} < 0) {agree} = __hipcpu_c;\n"
                f"else if ({agree} != (int)__hipcpu_c)\n"
                f"    ::hipcpu::fission_divergent(\"{where}\");")  # fmt: skip
        out.append(f"int {agree} = -1;")
        out += self._threads(condition.instance, getattr(condition, "context", -1),
                             [condition.cursor], body, condition.cursor.location.line)  # fmt: skip
        return f"{agree} == 1"

    def inline(self, item: Inline) -> list[str]:
        out = ["{", *item.instance.preamble, *self._hoisted(item.instance)]
        inits = []
        for param, argument in item.arguments:
            v = self.variables[(item.instance.number, param.get_usr())]
            inits.append(
                f"::new ((void*)&__hipcpu_v{v.number}[__hipcpu_t]) "
                f"__hipcpu_T{v.number}({argument});"
            )
        out += self._threads(item.caller, getattr(item, "context", -1),
                             list(item.call.get_arguments()), "\n".join(inits),
                             item.call.location.line)  # fmt: skip
        out += self.items(item.items)
        out.append("}")
        return out

    # ---- stretches --------------------------------------------------------------------------
    def _refs(self, instance: Instance, context: int) -> list[str]:
        refs, names = [], set()
        for v in self.variables.values():
            if v.instance is not instance or context not in v.contexts:
                continue
            if v.promoted or (v.hoisted and v.thread_local):
                name = v.cursor.spelling
                if name in names:
                    raise Unsplittable(f"two variables named {name} live across barriers")
                names.add(name)
                target = (
                    f"__hipcpu_v{v.number}[__hipcpu_t]" if v.promoted else f"__hipcpu_h{v.number}"
                )
                refs.append(f"auto& {name} = {target};")
        return refs

    def _threads(
        self, instance: Instance, context: int, cursors: list[Any], body: str, line: int,
        label: str = "",
    ) -> list[str]:  # fmt: skip
        """The loop over the block's threads that runs `body` (the code of `cursors`)."""
        out = fission_threads.loop_head(self.p.functions, cursors, self.returns)
        out += [*self._refs(instance, context), f'#line {line} "{self.file}"', body, "}"]
        if label:
            out.append(f"{label}:;")
        out.append("}")
        return out

    def run(self, run: Run) -> list[str]:
        first, last = run.statements[0], run.statements[-1]
        start, end = first.extent.start.offset, statement_end(self.p.src, last)
        edits: list[tuple[int, int, str]] = []
        label = ""
        for statement in run.statements:
            if kind(statement) == "DECL_STMT":
                edit = self._declaration(statement, run.instance)
                if edit is not None:
                    edits.append(edit)
            for node, inside_loop in walk_flow(statement):
                k = kind(node)
                if k == "RETURN_STMT":
                    if run.instance.number != 0:
                        raise Unsplittable("an inlined function returns early")
                    if not label:
                        self.labels += 1
                        label = f"__hipcpu_end{self.labels}"
                    edits.append((node.extent.start.offset, statement_end(self.p.src, node),
                              f"{{ __hipcpu_done[__hipcpu_t] = 1; goto {label}; }}"))  # fmt: skip
                elif k in ("BREAK_STMT", "CONTINUE_STMT") and not inside_loop:
                    raise Unsplittable(
                        f"a {k[:-5].lower()} leaves a loop that waits, line {node.location.line}"
                    )
        text = self._edited(start, end, edits)
        if run.header and not text.rstrip().endswith(";"):
            text += ";"
        return self._threads(run.instance, getattr(run, "context", -1), run.statements, text,
                             first.location.line, label)  # fmt: skip

    def _edited(self, start: int, end: int, edits: list[tuple[int, int, str]]) -> str:
        out, at = [], start
        for a, b, text in sorted(edits):
            out.append(self.p.text(at, a))
            out.append(text)
            at = b
        out.append(self.p.text(at, end))
        return "".join(out)

    # ---- declarations -----------------------------------------------------------------------
    def _declaration(self, statement: Any, instance: Instance) -> tuple[int, int, str] | None:
        """The statement declaring promoted or hoisted variables, rewritten: a promoted one's
        initial value goes to thread t's element, a hoisted one moved to the kernel's top,
        the others stay declared."""
        if _declares_types_only(statement):
            return (statement.extent.start.offset, statement_end(self.p.src, statement), ";")
        found = []
        for var, declaration, _ in declarators(self.unit, self.p.src, statement):
            found.append((self._known(var, instance), declaration))
        if not any(v is not None and (v.promoted or v.hoisted) for v, _ in found):
            return None
        parts = []
        for v, declaration in found:
            if v is None or not (v.promoted or v.hoisted):
                parts.append(declaration + ";")
            elif v.promoted:
                parts.append(initialization(v))
        start, end = statement.extent.start.offset, statement_end(self.p.src, statement)
        return (start, end, " ".join(parts) or ";")
