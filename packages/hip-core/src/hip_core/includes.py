"""Include options, and the files a compile may read through `#include`, for programs.

Include options (`resolved_options`): every include directory option, `-Idir`, `-I dir` (one
string), `"-I", "dir"` (two entries), `--include-path=dir` and `"--include-path", "dir"`, becomes
one `-I<absolute dir>`, resolved against the current working directory when a program compiles
(as a compiler resolves it). Every platform then gets a spelling it takes and a path that holds
wherever it compiles: the cpu platform compiles in a temporary directory, where a relative path
finds nothing, and ROCm 5.2's hiprtc reads `--include-path=d` as `--include` of `-path=d`. The
cache key names the directory, not a path relative to wherever the process happened to be. A
directory that does not exist is an error (FileNotFoundError, NotADirectoryError), where
compilers skip it silently: it is nearly always a relative path taken from another directory.

The cache key (`scan_includes`): hiprtc and nvrtc report no dependency list, so the source's
`#include "..."` and `<...>` lines (and `#include_next`, `#import`, `__has_include(...)`) are
resolved here the way the compilers search: a quoted name in the including file's directory
(for the source and `headers=`, the program name's directory, which clang-based hiprtc may use),
then in every `-I` directory in order. Every file found is followed in turn (includes of
includes), and each one's path and contents go into the key, so editing, adding or removing any
header that a compile can reach compiles again. The search over-approximates: a same-named
header later in the path, or one behind `#if 0`, is hashed too, which only costs a recompile
when it changes. The compiler's own system directories are not searched: they are part of the
compiler's identity, which the key names.

What the scan cannot follow makes a program uncacheable (`IncludeScan.unfollowed`): an include
whose argument is not a literal `"..."` or `<...>` (`#define CFG "cfg.h"` then `#include CFG`,
or `#include STR(name)`), the same in `__has_include`, `#embed`, and options that read files or
search directories the scan does not model (`-include`, `-imacros`, `-isystem`, `-iquote`,
`-idirafter`, `--pre-include=`, `--system-include=`, `@file`). Why not hash more instead: a
computed include can name any path (a header under an `-I` directory, one beside the including
file, `../cfg.h`, an absolute path) and only the preprocessor knows which; hashing every file
under the `-I` directories would still miss the others, and no bounded set of files is sure to
hold it. hiprtc and nvrtc cannot say what they read, so not caching is the one choice correct
on every platform. Its cost is a compile per `load()` on nvidia and amd; on the cpu platform
hip-ffi's own cache still serves such a program, since the host compiler does report every file
it read and that cache re-checks them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# An include-like directive and its argument: "name", <name>, or anything else (a macro).
_DIRECTIVE = re.compile(
    rb"^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*"
    rb'(?:"([^"\r\n]+)"|<([^>\r\n]+)>|([^\r\n]*))',
    re.M,
)
_HAS_INCLUDE = re.compile(
    rb"\b__has_(include_next|include|embed)[ \t]*\([ \t]*"
    rb'(?:"([^"\r\n]+)"|<([^>\r\n]+)>|([^\r\n]*))'
)
_INCLUDE_PATH = ("-I", "--include-path")  # alone: the directory is the next option
#: Options that make the compiler read files, or search directories, that the scan does not
#: follow; `--include-path` is not one of them (checked first).
_UNMODELLED = ("-i", "--include", "--pre-include", "--system-include", "--embed-dir", "@")


def normalized_options(options: Sequence[str]) -> list[str]:
    """`options` with each include directory option as one `-I<dir>` (the directory as given);
    ValueError for one that names no directory."""
    out: list[str] = []
    pending: str | None = None  # an option whose value is the next entry
    for option in options:
        if pending is not None:
            if pending in _INCLUDE_PATH and not option.strip():
                raise ValueError(f"include option {pending!r}, {option!r} names no directory")
            out.append(f"-I{option}" if pending in _INCLUDE_PATH else option)
            pending = None
            continue
        if option in (*_INCLUDE_PATH, "-D", "-U"):  # "-D", "X": X is no option of its own
            pending = option
            if option not in _INCLUDE_PATH:
                out.append(option)
            continue
        directory = _attached_directory(option)
        if directory is None:
            out.append(option)
        elif not directory.strip():
            raise ValueError(f"include option {option!r} names no directory")
        else:
            out.append(f"-I{directory}")
    if pending is not None:
        raise ValueError(f"option {pending!r} is the last one: it needs a value after it")
    return out


def _attached_directory(option: str) -> str | None:
    """The directory of `-Idir`, `-I dir` or `--include-path=dir`; None for another option."""
    if option.startswith("--include-path="):
        return option[len("--include-path=") :]
    if option.startswith("-I"):
        return option[2:].lstrip()  # "-I dir" as one string: the directory, not " dir"
    return None


def resolved_options(options: Sequence[str]) -> tuple[str, ...]:
    """`normalized_options` with every include directory absolute, resolved against the
    current working directory now. Raises FileNotFoundError (NotADirectoryError) for an
    include directory that does not exist (is not a directory), ValueError for a malformed
    option."""
    out: list[str] = []
    for option in normalized_options(options):
        if option.startswith("-I"):
            given = option[2:]
            directory = os.path.abspath(given)  # what a compiler run here would search
            if not os.path.isdir(directory):
                exists = os.path.exists(directory)
                where = "" if os.path.isabs(given) else f" (relative to {os.getcwd()!r})"
                problem = "is not a directory" if exists else "does not exist"
                error = NotADirectoryError if exists else FileNotFoundError
                raise error(f"include directory {given!r}{where} {problem}")
            option = f"-I{directory}"
        out.append(option)
    return tuple(out)


def include_dirs(options: Sequence[str]) -> list[str]:
    """The `-I` directories of compiler options, in order (any form `normalized_options`
    takes)."""
    return [option[2:] for option in normalized_options(options) if option.startswith("-I")]


@dataclass(frozen=True)
class IncludeScan:
    """What `scan_includes` found: (path, contents) of every file on disk the compile may
    include, sorted by path; and what it could not follow (empty when the files are all)."""

    files: list[tuple[str, bytes]]
    unfollowed: tuple[str, ...]


def scan_includes(
    source: str, options: Sequence[str], headers: Mapping[str, str], *, name: str
) -> IncludeScan:
    """The files on disk that `source` (and the `headers=` contents) may include, directly or
    through other includes; see the module docstring for what counts as unfollowed."""
    dirs = include_dirs(options)
    unfollowed = [f"option {option!r}" for option in options if _unmodelled(option)]
    top = os.path.dirname(name) or "."
    found: dict[str, bytes] = {}
    pending = [(text.encode(), top, where) for text, where in _texts(source, headers, name)]
    while pending:
        text, here, where = pending.pop()
        for match in (*_DIRECTIVE.finditer(text), *_HAS_INCLUDE.finditer(text)):
            kind, quoted, angled, other = match.groups()
            if kind == b"embed" or other is not None:
                line = match.group(0).decode(errors="replace").strip()
                unfollowed.append(f"{line!r} in {where}")
                continue
            included = os.fsdecode(quoted if quoted is not None else angled)
            for directory in [here, *dirs] if quoted is not None else dirs:
                path = os.path.normpath(os.path.join(directory, included))
                if path in found:
                    continue
                contents = _read_regular(path)
                if contents is not None:
                    found[path] = contents
                    pending.append((contents, os.path.dirname(path), path))
    return IncludeScan(sorted(found.items()), tuple(unfollowed))


def _texts(source: str, headers: Mapping[str, str], name: str) -> list[tuple[str, str]]:
    """(text, where it comes from, for messages) of the source and each `headers=` entry."""
    return [(source, name), *((text, f"headers[{key!r}]") for key, text in headers.items())]


def _unmodelled(option: str) -> bool:
    return not option.startswith(_INCLUDE_PATH) and option.startswith(_UNMODELLED)


def _read_regular(path: str) -> bytes | None:
    """A regular file's bytes, or None (missing, unreadable, a directory or a FIFO)."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None
