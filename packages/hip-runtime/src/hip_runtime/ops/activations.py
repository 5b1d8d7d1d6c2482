"""Activations: silu, gelu (erf or tanh), and swiglu, the gated silu of the Llama MLP.

f32/f16/bf16 tensors, computed in f32 and stored in the input type; `out=x` works in place.
Queued on the backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase
from hip_runtime.tensor import DeviceTensor

_GELU = {"none": "gelu_erf", "erf": "gelu_erf", "tanh": "gelu_tanh"}


class ActivationOps(OpsBase):
    def _unary(self, name: str, x: DeviceTensor, out: DeviceTensor | None) -> DeviceTensor:
        x, t = self._float(x, "x")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        kernel = self._kernel("activations.hip", f"{name}_{t.suffix}")
        self._launch_flat(kernel, x.size, x.dtype.itemsize, x, y, x.size)
        return y

    def silu(self, x: DeviceTensor, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """x · sigmoid(x)."""
        return self._unary("silu", x, out)

    def gelu(
        self, x: DeviceTensor, *, approximate: str = "none", out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """GELU: exact with erf (`approximate="none"`), or the tanh approximation ("tanh")."""
        if approximate not in _GELU:
            raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")
        return self._unary(_GELU[approximate], x, out)

    def swiglu(
        self, gate: DeviceTensor, up: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """silu(gate) · up, the Llama MLP's gating (the silu is on the gate, not on up)."""
        return self._binary("activations.hip", "swiglu", gate, up, out)


__all__ = ["ActivationOps"]
