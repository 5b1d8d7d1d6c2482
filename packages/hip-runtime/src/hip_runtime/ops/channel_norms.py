"""Normalizations per channel: group_norm and batch_norm (inference), torch's semantics.

x [N, C, *] C-contiguous (any number of spatial axes, none included), f32/f16/bf16 with f32
statistics; batch_norm also takes channels-last tensors ([N, *, C], `channels_last=True`).
weight, bias, running_mean and running_var are [C] of x's dtype (weight and bias may be
None). kernels/channel_norms.hip (group_norm: each group read twice, the second time mostly
from L2; with _ON_CHIP, held in shared memory where it fits); queued on the backend's
stream; `out=x` works in place; a repeated call is served by a plan (`OpsBase._planned`).
"""

from __future__ import annotations

import math
from typing import Any

from hip_core import Kernel
from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.convolution import launch_outputs, spatial_type
from hip_runtime.ops.plans import plan_head, plan_key
from hip_runtime.tensors.tensor import DeviceTensor

_GROUP_BLOCK = 512  # group_norm: threads per group
_FEW_GROUPS_BLOCK = 1024  # ... where the groups are fewer than two per multiprocessor
_VECTORS = True  # group_norm: 16-byte accesses where the layout allows (False: by element)
_GROUP_PASSES = 2  # group_norm: reads of each group (2: statistics, output; 3: mean, var, output)
# ... the two-read kernel's cache hints (channel_norms.hip's HIPK_HINT_* bits): y stored
# streaming (H200, bf16 [8, 512, 64, 64], 32 groups: 32.8 against 34.5 µs; 64 groups 33.1
# against 35.4; [32, 128, 56, 56] 28.7 against 29.8; a last-use second read was slower, an
# evict_last first read no faster)
_GROUP_HINTS = 1
# ... four vectors a thread in flight (group_norm_deep_<t>), in blocks of 256 threads, 512
# where the groups are fewer than two per multiprocessor (H200, bf16, 32 groups, against two
# in flight and the streaming store: [8, 512, 64, 64] 24.4 µs against 32.6, 64 groups 24.5
# against 33.0, [32, 128, 56, 56] 22.7 against 28.7; [2, 320, 64, 64] 16.1 against 14.9).
# False: group_norm_<t>, two in flight, _GROUP_BLOCK / _FEW_GROUPS_BLOCK threads.
_GROUP_DEEP = True
_DEEP_BLOCK = 256
_DEEP_FEW_GROUPS_BLOCK = 512
# group_norm: a group within the device's opt-in shared memory is held there (one read of x)
# instead of read twice. Off: on an H100 (bench_conv's bf16 [8, 512, 64, 64], 128 KiB groups;
# 2026-11-27) no variant of it beat two reads, whose second read comes from L2 (the groups
# of a wave fit it): 32 groups 0.59-0.66 of the copy rate against 0.61-0.63, 64 groups
# 0.46-0.58 against 0.61. Kept, tested, for devices where that does not hold.
_ON_CHIP = False
_ON_CHIP_BLOCK = 1024  # ... threads per group (fewer for a group of fewer vectors)
_ON_CHIP_FLIGHT = 8  # ... 16-byte loads a thread issues before their use (4 or 8)
_ON_CHIP_PERSISTENT = False  # ... as many blocks as fit at once, each group's write overlapping
#                              the next one's read (False: one block per group)


class ChannelNormOps(OpsBase):
    def group_norm(
        self,
        x: DeviceTensor,
        num_groups: int,
        weight: DeviceTensor | None = None,
        bias: DeviceTensor | None = None,
        eps: float = 1e-5,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.group_norm: the C channels in `num_groups` groups, each group
        of each image normalized by its mean and biased variance, then · weight[c] + bias[c].
        One block per group, which reads the group twice: Welford statistics, then the
        output (the second read mostly from L2). With _ON_CHIP, a group that fits the
        device's opt-in shared memory is read once into it instead. Queued on the backend's
        stream."""
        key = plan_key(x, weight, bias, out)
        if key is not None:
            key = ("group_norm", *key, num_groups, eps)
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x, weight, bias), out)
                if y is not None:
                    kernel, grid, block, args, shared = plan[4:]
                    kernel.launch(grid, block, x, weight, bias, y, *args, shared_mem=shared,
                                  stream=self.stream)  # fmt: skip
                    return y
        x, c, inner, suffix = self._channels("group_norm", x, False)
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            raise ValueError(f"group_norm: num_groups must be a positive int, not {num_groups!r}")
        if c % num_groups:
            raise ValueError(
                f"group_norm: x's {c} channels are not divisible by {num_groups} groups"
            )
        for tensor, name in ((weight, "weight"), (bias, "bias")):
            if tensor is not None:
                self._same(x, tensor, name, (c,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight, bias))
        grid = x.shape[0] * num_groups
        lanes = 16 // x.dtype.itemsize
        aligned = inner % lanes == 0 and x.ptr % 16 == 0 and y.ptr % 16 == 0
        vec = lanes if aligned and _VECTORS else 1
        shared = c // num_groups * inner * x.dtype.itemsize  # one group's bytes
        kernel = self._kernel("channel_norms.hip", f"group_norm_on_chip_{suffix}")
        if _ON_CHIP and shared and self._fits_shared(kernel, shared):
            args = (c, num_groups, inner, float(eps), vec, _ON_CHIP_FLIGHT, grid)
            vectors = shared // (vec * x.dtype.itemsize)
            block = min(_ON_CHIP_BLOCK, self._max_block, -(-vectors // 64) * 64)
            if _ON_CHIP_PERSISTENT:
                slots = kernel.max_active_blocks(block, shared)
                grid = min(grid, max(1, slots) * self.device.properties.multiprocessors)
        else:
            kernel = self._kernel("channel_norms.hip", f"group_norm_{suffix}")
            args = (c, num_groups, inner, float(eps), vec, _GROUP_PASSES, _GROUP_HINTS)
            shared = 0
            # Fewer groups than two per multiprocessor: wider blocks (H200, bf16: 1024 threads
            # 55 % of the copy rate at 256 groups against 50 % for 512; 512 ahead at 1024).
            few = grid < 2 * self.device.properties.multiprocessors
            block = min(_FEW_GROUPS_BLOCK if few else _GROUP_BLOCK, self._max_block)
            if _GROUP_DEEP and _GROUP_PASSES == 2:
                kernel = self._kernel("channel_norms.hip", f"group_norm_deep_{suffix}")
                args = (c, num_groups, inner, float(eps), vec, _GROUP_HINTS)
                block = min(_DEEP_FEW_GROUPS_BLOCK if few else _DEEP_BLOCK, self._max_block)
        if y.size:
            kernel.launch(grid, block, x, weight, bias, y, *args, shared_mem=shared,
                          stream=self.stream)  # fmt: skip
            plan = (kernel, grid, block, args, shared)
            self._keep_plan(key, (*plan_head((x, weight, bias), y), *plan))
        return y

    @staticmethod
    def _fits_shared(kernel: Kernel, nbytes: int) -> bool:
        """Whether `kernel` may be launched with `nbytes` of dynamic shared memory on its
        device (its opt-in limit less its static part; allowed for every later launch)."""
        try:
            kernel.set_max_dynamic_shared_memory(nbytes)
        except ValueError:
            return False
        return True

    def batch_norm(
        self,
        x: DeviceTensor,
        running_mean: DeviceTensor,
        running_var: DeviceTensor,
        weight: DeviceTensor | None = None,
        bias: DeviceTensor | None = None,
        eps: float = 1e-5,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.batch_norm with training=False: (x - running_mean[c]) /
        sqrt(running_var[c] + eps) · weight[c] + bias[c]. Queued on the backend's stream."""
        inputs = (x, running_mean, running_var, weight, bias)
        key = plan_key(*inputs, out)
        if key is not None:
            key = ("batch_norm", *key, eps, bool(channels_last))
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, inputs, out)
                if y is not None:
                    launch_outputs(self, plan[4], y.size, *inputs, y, y.size, *plan[5])
                    return y
        x, c, inner, suffix = self._channels("batch_norm", x, bool(channels_last))
        self._same(x, running_mean, "running_mean", (c,))
        self._same(x, running_var, "running_var", (c,))
        for tensor, name in ((weight, "weight"), (bias, "bias")):
            if tensor is not None:
                self._same(x, tensor, name, (c,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=inputs[1:])
        kernel = self._kernel("channel_norms.hip", f"batch_norm_{suffix}")
        args = (c, inner, float(eps))
        launch_outputs(self, kernel, y.size, x, running_mean, running_var, weight, bias, y,
                       y.size, *args)  # fmt: skip
        if y.size:
            self._keep_plan(key, (*plan_head(inputs, y), kernel, args))
        return y

    def _channels(self, op: str, x: Any, channels_last: bool) -> tuple[DeviceTensor, int, int, str]:
        """x checked (C-contiguous f32/f16/bf16 of at least 2 axes), its channel count and
        the elements between consecutive channels (1 when channels last), its kernel suffix."""
        x = self._tensor(x, "x")
        suffix = spatial_type(op, x).suffix
        if x.ndim < 2:
            raise ValueError(f"{op}: x must be [N, C, *] (at least 2-D), not {x.shape}")
        if channels_last:
            return x, x.shape[-1], 1, suffix
        return x, x.shape[1], math.prod(x.shape[2:]), suffix


__all__ = ["ChannelNormOps"]
