"""The one version of all five distributions.

`VERSION` at the repository root is the single place the version is written by hand.
Every package's `_version.py` and every sibling pin (`hip-ffi==V`) is derived from it:

    python tools/version.py bump 0.2.0   # write V everywhere
    python tools/version.py check        # exit 1 and list every disagreement

`tests/test_versions.py` runs the same check, so a pin edited by hand fails the tests.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = ROOT / "VERSION"
PACKAGES = {
    "hip-ffi": "hip_ffi",
    "hip-cpu": "hip_cpu",
    "hip-core": "hip_core",
    "hip-runtime": "hip_runtime",
    "hip-backend": "hip_backend",
}
_PIN = re.compile(r'"(?P<name>hip-(?:ffi|cpu|core|runtime|backend))==(?P<version>[^"]+)"')
_VERSION_LINE = re.compile(r'^__version__ = "(?P<version>[^"]+)"$', re.MULTILINE)
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?$")


def read_version() -> str:
    return VERSION_FILE.read_text().strip()


def version_files() -> dict[str, Path]:
    return {
        dist: ROOT / "packages" / dist / "src" / mod / "_version.py"
        for dist, mod in PACKAGES.items()
    }


def pyproject_files() -> dict[str, Path]:
    return {dist: ROOT / "packages" / dist / "pyproject.toml" for dist in PACKAGES}


def disagreements(expected: str | None = None) -> list[str]:
    """Every place whose version or sibling pin differs from VERSION, as readable lines."""
    expected = expected or read_version()
    problems = []
    for _dist, path in version_files().items():
        match = _VERSION_LINE.search(path.read_text())
        found = match["version"] if match else None
        if found != expected:
            problems.append(
                f"{path.relative_to(ROOT)}: __version__ is {found!r}, VERSION is {expected!r}"
            )
    for _dist, path in pyproject_files().items():
        for pin in _PIN.finditer(path.read_text()):
            if pin["version"] != expected:
                problems.append(
                    f"{path.relative_to(ROOT)}: pins {pin['name']}=={pin['version']}, "
                    f"VERSION is {expected!r}"
                )
    return problems


def bump(new: str) -> None:
    if not _SEMVER.match(new):
        raise SystemExit(f"not a version: {new!r} (expected e.g. 0.2.0, 0.2.0rc1)")
    VERSION_FILE.write_text(new + "\n")
    for path in version_files().values():
        path.write_text(_VERSION_LINE.sub(f'__version__ = "{new}"', path.read_text()))
    for path in pyproject_files().values():
        path.write_text(_PIN.sub(lambda m: f'"{m["name"]}=={new}"', path.read_text()))


def main(argv: list[str]) -> int:
    if argv[:1] == ["bump"] and len(argv) == 2:
        bump(argv[1])
        print(f"version is now {argv[1]} in VERSION, every _version.py and every sibling pin")
        return 0
    if argv == ["check"]:
        problems = disagreements()
        print("\n".join(problems) or f"all {len(PACKAGES)} packages agree on {read_version()}")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
