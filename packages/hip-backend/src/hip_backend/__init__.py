"""hip-backend: every layer of the stack (hip-ffi, hip-core, hip-runtime) in one import.

    import hip_backend as hb

    with hb.HipBackend() as backend:             # hip_runtime.HipBackend
        y = backend.rmsnorm(backend.from_numpy(x), eps=1e-6).to_numpy()
    hb.Device(0).properties                      # hip_core.Device
    hb.describe()                                # hip_ffi.describe: platform, libraries, devices

Every public name of every layer (its `__all__`) is reachable here under its own name, and
the layer packages themselves are `hip_backend.ffi`, `hip_backend.core` and
`hip_backend.runtime` (also importable as `import hip_backend.core`). No name is written here:
each layer's `__all__` is star-imported and appended to this `__all__` (the forms type
checkers and editors read), so a name a layer adds is here at once. Two layers may export one
name only for one object (hip-core re-exports hip-ffi's `DeviceProperties`; a test checks
it), so the flat namespace is unambiguous. The `hip-backend` command line lives in
`hip_backend.cli`.
"""

from __future__ import annotations

import sys
from types import ModuleType

import hip_core as core
import hip_ffi as ffi
import hip_runtime as runtime
from hip_backend import _version
from hip_core import *  # noqa: F403
from hip_ffi import *  # noqa: F403
from hip_runtime import *  # noqa: F403

# After the star imports, which bring each layer's own `__version__` (a test checks all agree).
__version__ = _version.__version__

#: The layer packages, bottom to top, under the names hip_backend gives them.
LAYERS: dict[str, ModuleType] = {"ffi": ffi, "core": core, "runtime": runtime}

# `import hip_backend.core` finds the layer itself (the same module object, not a copy).
for _alias, _module in LAYERS.items():
    sys.modules.setdefault(f"{__name__}.{_alias}", _module)

# A name two layers share (`__version__`, a re-exported class) is listed twice; `import *`
# binds it once.
__all__ = ["LAYERS", "core", "ffi", "runtime"]
__all__ += ffi.__all__
__all__ += core.__all__
__all__ += runtime.__all__
