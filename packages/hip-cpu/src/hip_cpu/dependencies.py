"""The user files a cpu-platform compile read, for its cache entry, and whether a hit still holds.

The cache key (compiler.py) covers the program, its `headers=`, its options and our headers,
but not the files it reads from disk through `-I` directories or by path: those the host
compiler names itself (`-MMD`), every file its preprocessor opened outside the system
directories, the targets of computed includes (`#define CFG "cfg.h"`, `#include CFG`) too. An
entry records each such file with its SHA-256 (`dependencies`, from the scan pass and the
build) and the scan pass's list of them (`scanned`). A hit holds when:

- every recorded file still has its hash (an edited header compiles again), and
- for a program with `-I` directories or any file read from disk, the scan pass, run again now
  (the preprocessor alone, about 0.1 s), reads the very same files. That catches what no hash
  of a file that was read can: a header that now shadows one later in the search path, one
  that `__has_include` finds now, a computed include that resolves elsewhere. A program that
  reads only its own `headers=` and ours skips the re-run: nothing on disk can change it.
"""

from __future__ import annotations

import re
from pathlib import Path

from hip_cpu import toolchain

TARGET = "hipcpu-dependencies"  # the -MT target: a fixed name, whatever the program is called
# A depfile word: an escaped space or '#', an escaped '$' ($$), or any other non-blank.
_WORD = re.compile(r"(?:\\[ #]|\$\$|\S)+")


def depfile_flags(depfile: Path) -> list[str]:
    """Compiler flags that write the user files read to `depfile` (make syntax)."""
    return ["-MMD", "-MF", str(depfile), "-MT", TARGET]


def user_files(depfile: Path, work: Path) -> list[str]:
    """The files a `depfile` names outside the program's directory `work` and ours, resolved,
    sorted; OSError when it is missing."""
    text = depfile.read_text().replace("\\\n", " ")
    words = _WORD.findall(text.removeprefix(f"{TARGET}:"))
    found = set()
    for word in words:
        name = word.replace("\\ ", " ").replace("\\#", "#").replace("$$", "$")
        path = (work / name).resolve()
        if not (path.is_relative_to(work.resolve()) or path.is_relative_to(toolchain.INCLUDE_DIR)):
            found.add(str(path))
    return sorted(found)


def record(paths: list[str]) -> list[list[str]]:
    """[path, SHA-256 of its contents] of each file; OSError when one cannot be read."""
    return [[path, toolchain.digest(Path(path).read_bytes())] for path in paths]


def unchanged(recorded: object) -> bool:
    """Whether every recorded [path, hash] still holds (False for a record not in this form)."""
    try:
        return isinstance(recorded, list) and all(
            toolchain.digest(Path(path).read_bytes()) == digest for path, digest in recorded
        )
    except (OSError, TypeError, ValueError):  # a file gone, or a record not in this form
        return False


def needs_rescan(info: dict[str, object], flags: list[str]) -> bool:
    """Whether a hit must run the scan pass again (see the module docstring)."""
    return bool(info.get("dependencies")) or any(flag.startswith("-I") for flag in flags)


def rescan_agrees(info: dict[str, object], command: list[str], depfile: Path, work: Path) -> bool:
    """Run the scan pass `command` (which writes `depfile`) in `work`: does it read the files
    the entry recorded as `scanned`?"""
    status, _ = toolchain.run(command, work, counted=False)  # not a build: not in the stats
    if status != 0:
        return False  # e.g. a header gone: the build says why
    try:
        return user_files(depfile, work) == info.get("scanned")
    except OSError:
        return False
