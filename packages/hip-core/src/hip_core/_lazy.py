"""Package namespaces that import a public name's module on first use (PEP 562).

    __getattr__, __dir__ = lazy_exports(__name__, {"Program": "hip_core.program", ...})

A package's `__init__` lists where each public name lives; the module is imported when the
name is first read (`from pkg import Name` or `pkg.Name`) and the value is then bound in the
package, so later reads cost a dictionary lookup. Any other name is tried as a submodule
(`pkg.testing`). What type checkers read stays a plain import under `if TYPE_CHECKING:`.
Importing a layer thus costs only what it needs at once (issue 15: `import hip_runtime` within
30 ms of numpy + ml_dtypes).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public names live in `homes` (name ->
    module path)."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # what import machinery and tools probe for: never a module
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home = homes.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
        else:
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as error:
                if error.name != f"{package}.{name}":
                    raise  # the submodule exists and failed to import something
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__
