"""hip-backend: every layer of the stack (hip-ffi, hip-core, hip-runtime) in one import.

    import hip_backend as hb

    with hb.HipBackend() as backend:             # hip_runtime.HipBackend
        y = backend.rmsnorm(backend.from_numpy(x), eps=1e-6).to_numpy()
    hb.Device(0).properties                      # hip_core.Device
    hb.describe()                                # hip_ffi.describe: platform, libraries, devices

Every public name of every layer (its `__all__`) is reachable here under its own name, and
the layer packages themselves are `hip_backend.ffi`, `hip_backend.core` and
`hip_backend.runtime` (also importable as `import hip_backend.core`). No name is written here:
each layer's `__all__` is appended to this `__all__` and read from its layer on first use
(type checkers and editors read star imports), so a name a layer adds is here at once. Two
layers may export one name only for one object (hip-core re-exports hip-ffi's
`DeviceProperties`; a test checks it), so the flat namespace is unambiguous. The
`hip-backend` command line lives in `hip_backend.cli`.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING

import hip_core as core
import hip_ffi as ffi
import hip_runtime as runtime
from hip_backend import _version
from hip_core._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers and editors read; at run time, __getattr__ below
    from hip_core import *  # noqa: F403
    from hip_ffi import *  # noqa: F403
    from hip_runtime import *  # noqa: F403

# Each layer's own `__version__` agrees with this one (a test checks).
__version__ = _version.__version__

#: The layer packages, bottom to top, under the names hip_backend gives them.
LAYERS: dict[str, ModuleType] = {"ffi": ffi, "core": core, "runtime": runtime}

# `import hip_backend.core` finds the layer itself (the same module object, not a copy).
for _alias, _module in LAYERS.items():
    sys.modules.setdefault(f"{__name__}.{_alias}", _module)

# A name two layers share (`__version__`, a re-exported class) is listed twice; it is one object.
__all__ = ["LAYERS", "core", "ffi", "runtime"]
__all__ += ffi.__all__
__all__ += core.__all__
__all__ += runtime.__all__

# Every layer name is read from its layer on first use (PEP 562), as the layers load theirs:
# `import hip_backend` imports no op, compiler or loader until one is used (issue 15).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        name: module.__name__
        for module in reversed(LAYERS.values())
        for name in module.__all__
        if name != "__version__"
    },
)
