"""Compatibility path: this module now lives at `hip_runtime.libraries.dnn`.

hip-runtime's modules were grouped into folders by layer (issue 40); this path is kept because
docs/platforms/dnn.md of earlier releases named `hip_runtime.dnn.DnnError`, the exception a user
catches from a failing DNN library call. It only re-exports the public names (the same objects); new
code imports `hip_runtime.libraries.dnn`, and nothing inside the package imports this path.
"""

from __future__ import annotations

from hip_runtime.libraries.dnn import (
    DATA_TYPES,
    POOL_MODES,
    Dnn,
    DnnError,
    backend_dnn,
    check_miopen,
)

__all__ = [
    "DATA_TYPES",
    "POOL_MODES",
    "Dnn",
    "DnnError",
    "backend_dnn",
    "check_miopen",
]
