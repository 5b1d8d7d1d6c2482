"""Assert what an install of one distribution brings: its layer and those below, nothing above.

Run by `nox -s tests(package=...)` right after installing a single wheel, e.g.
`python tools/check_isolation.py hip-core` must find hip_ffi, hip_cpu and hip_core and must NOT
find hip_runtime or hip_backend; `hip-ffi` must find hip_ffi alone (the bindings install without
the cpu platform's runtime).
"""

from __future__ import annotations

import importlib.util
import sys

LAYERS = ("hip_ffi", "hip_cpu", "hip_core", "hip_runtime", "hip_backend")  # bottom to top


def main(package: str) -> int:
    level = LAYERS.index(package.replace("-", "_"))
    wrong = []
    for index, module in enumerate(LAYERS):
        present = importlib.util.find_spec(module) is not None
        if present != (index <= level):
            wrong.append(f"{module} is {'present' if present else 'missing'}")
    if wrong:
        print(f"installing only {package} gave the wrong layers: {', '.join(wrong)}")
        return 1
    print(f"installing only {package} brings {', '.join(LAYERS[: level + 1])} and nothing above")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
