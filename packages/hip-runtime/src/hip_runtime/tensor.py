"""Compatibility path: this module now lives at `hip_runtime.tensors.tensor`.

hip-runtime's modules were grouped into folders by layer (issue 40); this path is kept because the
API reference documented `DeviceTensor` as `hip_runtime.tensor.DeviceTensor`, and code written
against earlier releases imports it from there (`from hip_runtime import DeviceTensor` is the public
spelling). It only re-exports the public names (the same objects); new code imports
`hip_runtime.tensors.tensor`, and nothing inside the package imports this path.
"""

from __future__ import annotations

from hip_runtime.tensors.tensor import (
    DeviceTensor,
    Shape,
    ShapeLike,
    as_shape,
)

__all__ = [
    "DeviceTensor",
    "Shape",
    "ShapeLike",
    "as_shape",
]
