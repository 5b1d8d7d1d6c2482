"""The loop that runs one stretch of a split kernel for each thread of its block.

A stretch reads its indices from locals, not from the prelude's thread_locals: those live in
the code object's dynamic TLS (it is dlopened), each access is a `__tls_get_addr` call, and
the compiler made it again for every thread of every loop (most of a thread's cost in a
shared-memory tree). So the loop declares `uint3 threadIdx = <thread t's index>`, and
blockIdx, blockDim, gridDim copied once a block, where the stretch names them, shadowing the
thread_locals; `__shared__` arrays moved to the kernel's top are reached through references
bound once (fission.py's refs).

The thread_local threadIdx is still stored for thread t when a function the stretch calls may
read it (fission_ast.Functions.calls_reading_thread_index), when the stretch holds a lambda
(its body may not capture the locals, so none are declared), and when the executor runs the
block again to find which thread made a bad access (`fenced`, hip_cpu_fission.h).
"""

from __future__ import annotations

from typing import Any

from hip_cpu.fission_ast import BUILTIN_INDICES, Functions, kind, walk

#: Once a block, at the top of a split kernel (after `__hipcpu_b`, its block).
KERNEL_LINES = [
    "const bool __hipcpu_fenced = __hipcpu_b.fenced;",
    "[[maybe_unused]] const bool __hipcpu_flat = blockDim.y == 1 && blockDim.z == 1;",
    "[[maybe_unused]] const ::uint3 __hipcpu_blockIdx = blockIdx, "
    "__hipcpu_blockDim = blockDim, __hipcpu_gridDim = gridDim;",
]


def loop_head(functions: Functions, cursors: list[Any], returns: bool) -> list[str]:
    """The first lines of the loop over the block's threads that runs the code `cursors`,
    up to (not including) the stretch's own references: it opens two scopes."""
    nodes = [node for cursor in cursors for node in walk(cursor)]
    lambdas = any(kind(node) == "LAMBDA_EXPR" for node in nodes)
    store = lambdas or functions.calls_reading_thread_index(nodes)
    named = {
        node.referenced.spelling
        for node in nodes
        if kind(node) == "DECL_REF_EXPR" and functions.is_builtin_index(node.referenced)
    }
    out = ["for (unsigned __hipcpu_t = 0; __hipcpu_t < __hipcpu_n; ++__hipcpu_t) {"]
    if returns:
        out.append("if (__hipcpu_done[__hipcpu_t]) continue;")
    flag = "true" if store else "false"
    out += [f"::hipcpu::fission_thread<{flag}>(__hipcpu_b, __hipcpu_t, __hipcpu_fenced);", "{"]
    if not lambdas:
        for name in BUILTIN_INDICES:
            if name in named:
                value = (
                    "::hipcpu::fission_index(__hipcpu_b, __hipcpu_t, __hipcpu_flat)"
                    if name == "threadIdx"
                    else f"__hipcpu_{name}"
                )
                out.append(f"::uint3 {name} = {value};")
    return out
