"""The backend's compiled kernels: one loaded Module per kernel source and device.

Each `kernels/<family>.hip` is compiled at most once per process and device (and, through
hip-core's program cache, once per machine); every HipBackend on that device shares the
loaded modules. Loading is synchronous (compilation happens on the host).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

from hip_core import Device, Kernel, Module
from hip_core import hip_api as hip  # identifies the loaded platform: tests switch it per session
from hip_runtime.libraries import kernel_sources

_lock = threading.Lock()
_modules: dict[tuple[int, int, str, tuple[str, ...]], Module] = {}
_options: dict[str, tuple[str, ...]] = {}  # extra_options' compiler options per source

#: Sources whose every entry point waits for the kernel ahead before it touches memory
#: (kernels/early_start.h): their kernels start early where the device can (`Kernel.start_early`),
#: so a chain of them, a decode step's products, norms, rope and attention, overlaps each launch and
#: first loads with the kernel ahead's last blocks. A source joins only with that wait in every
#: entry point: one without it, started early, would race the kernel ahead.
EARLY_START = frozenset(
    {"gemv.hip", "rope.hip", "attention_decode.hip", "norms.hip", "swiglu_rms.hip"}
)


class KernelCache:
    """Kernels of one device by (source, name), e.g. `get("norms.hip", "rmsnorm_bf16")`."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self._kernels: dict[tuple[str, str], Kernel] = {}

    def module(self, source: str) -> Module:
        """The loaded module of `source` (compiled on first use, from the cache after)."""
        with _lock:
            options = _options.get(source, ())
            key = (id(hip()), self.device.ordinal, source, options)
            found = _modules.get(key)
            if found is None or found.closed:
                program = kernel_sources.program(source, options=options)
                found = _modules[key] = program.load(self.device)
            return found

    def get(self, source: str, name: str) -> Kernel:
        kernel = self._kernels.get((source, name))
        if kernel is None:
            kernel = self.module(source).get_kernel(name)
            if source in EARLY_START:
                kernel.start_early()
            self._kernels[(source, name)] = kernel
        return kernel

    def preload(self, *sources: str) -> None:
        """Compile and load `sources` now (all of them when none are named)."""
        for source in sources or tuple(kernel_sources.sources()):
            self.module(source)


@contextlib.contextmanager
def extra_options(source: str, options: Sequence[str]) -> Iterator[None]:
    """Inside, `source` (e.g. "attention_decode.hip") compiles with `options` added (e.g.
    "-DHIPK_DECODE_EARLY_LOADS=0"): a kernel variant beside the shipped one in one process, for
    benches (`bench_roofline.py --variant`) and tuning. Backends' caches get the variant's
    kernels for what they first ask for inside; a kernel already handed out stays as it was."""
    with _lock:
        saved = _options.get(source)
        _options[source] = (*(saved or ()), *options)
    try:
        yield
    finally:
        with _lock:
            if saved is None:
                del _options[source]
            else:
                _options[source] = saved


__all__ = ["KernelCache", "extra_options"]
