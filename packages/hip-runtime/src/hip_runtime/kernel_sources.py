"""Compatibility path: this module now lives at `hip_runtime.libraries.kernel_sources`.

hip-runtime's modules were grouped into folders by layer (issue 40); this path is kept because its
own usage example, kernels/README.md and hip-backend's selftest of earlier releases import `from
hip_runtime import kernel_sources`. It only re-exports the public names (the same objects); new code
imports `hip_runtime.libraries.kernel_sources`, and nothing inside the package imports this path.
"""

from __future__ import annotations

from hip_runtime.libraries.kernel_sources import (
    expand_type_lists,
    headers,
    kernels_dir,
    program,
    sources,
    type_lists,
)

__all__ = [
    "expand_type_lists",
    "headers",
    "kernels_dir",
    "program",
    "sources",
    "type_lists",
]
