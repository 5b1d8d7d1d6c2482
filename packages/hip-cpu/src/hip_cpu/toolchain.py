"""The host C++ compiler and the on-disk cache of what it builds (cpu platform).

Compiler: `HIP_FFI_CPU_CXX`, else `CXX`, else the first of g++, clang++, c++ on PATH. Its
identity (resolved path and `--version` banner) is part of every cache key.

Cache: `HIP_FFI_CPU_CACHE`, else `$XDG_CACHE_HOME/hip-ffi/cpu`, else `~/.cache/hip-ffi/cpu`.
An entry is keyed by a SHA-256 over everything that determines the output (ABI version,
compiler identity, flags, the host CPU for -march=native, the headers and the sources) and
written atomically (a temporary file in the same directory, then os.replace; the temporary
file is removed when the write fails), so concurrent processes never see half an entry and a
second run compiles nothing. Beside each entry a record (`<entry>.json`) holds its size and
SHA-256, written after it; every hit is checked against the record before it is used, so a
truncated or flipped entry (a full disk, a crash, bit rot) is rebuilt, never loaded: a damaged
shared object can crash dlopen. Without a writable cache directory everything still works; it
is only rebuilt in each process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
NATIVE_DIR = PACKAGE_DIR / "native"
ABI_VERSION = 3  # HIPCPU_ABI_VERSION in include/hip_cpu_abi.h

#: Flags of every build. -march=native: the code only ever runs on this host (the host CPU is
#: in the cache key). -fno-semantic-interposition and -fvisibility=hidden let kernels and
#: device functions inline into the executor's loops. -fno-math-errno: GPU math sets no errno,
#: and errno blocks vectorizing sqrtf. -fno-extern-tls-init: `extern __shared__` arrays are
#: plain thread-locals, no init wrapper. -fno-exceptions: device code has none. x86-64:
#: -mno-red-zone lets the inline fiber switch push right under the stack pointer, next to what
#: the kernel keeps across a barrier (one cache line per waiting thread, not two).
_X86_FLAGS = ("-mno-red-zone",) if platform.machine() == "x86_64" else ()
BASE_FLAGS = (
    "-std=c++17",
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-pthread",
    "-fno-exceptions",
    "-fno-semantic-interposition",
    "-fvisibility=hidden",
    "-fno-math-errno",
    "-fno-extern-tls-init",
    *_X86_FLAGS,
)
COMPILE_TIMEOUT_S = 600

#: Counts of builds and cache hits in this process (tests and benchmarks read them).
stats = {"compiles": 0, "cache_hits": 0}
_stats_lock = threading.Lock()


def count(event: str) -> None:
    with _stats_lock:
        stats[event] += 1


@dataclass(frozen=True)
class Compiler:
    """A host C++ compiler: its path, its `--version` banner and its short name/version."""

    path: str
    banner: str
    name: str  # "g++ 12.2.0", "clang++ 17.0.6"
    major: int
    minor: int


@functools.cache
def find_compiler() -> Compiler | None:
    """The compiler to use, or None when there is none."""
    candidates = [os.environ.get("HIP_FFI_CPU_CXX"), os.environ.get("CXX"), "g++", "clang++", "c++"]
    for candidate in candidates:
        path = shutil.which(candidate) if candidate else None
        if not path:
            continue
        try:
            banner = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=60, check=True
            ).stdout.splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            continue
        version = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", banner)
        major, minor = (int(version.group(1)), int(version.group(2))) if version else (0, 0)
        kind = "clang++" if "clang" in banner else "g++"
        name = f"{kind} {version.group(0)}" if version else kind
        return Compiler(os.path.realpath(path), banner, name, major, minor)
    return None


@functools.cache
def builtin_include(compiler: Compiler) -> str:
    """The compiler's own header directory (stddef.h, float.h...): fission.py's libclang
    parses with it, since the libclang wheel ships none of clang's."""
    try:
        found = subprocess.run([compiler.path, "-print-file-name=include"], capture_output=True,
                               text=True, timeout=60, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return found if os.path.isdir(found) else ""


#: The warp sizes the executor implements (hip_cpu_prelude.h).
WARP_SIZES = (1, 32, 64)


@functools.cache
def warp_size() -> int:
    """Lanes per warp: HIP_FFI_CPU_WARP_SIZE (1, 32 or 64; read once per process), else 32.

    The device's warpSize attribute and every program compiled without -mwavefrontsize64 /
    -mno-wavefrontsize64 use it. Raises ValueError for another value."""
    given = os.environ.get("HIP_FFI_CPU_WARP_SIZE", "").strip()
    if not given:
        return 32
    if not given.isdigit() or int(given) not in WARP_SIZES:
        raise ValueError(f"HIP_FFI_CPU_WARP_SIZE must be one of {WARP_SIZES}, not {given!r}")
    return int(given)


def no_compiler_message() -> str:
    return (
        "no C++ compiler found (tried $HIP_FFI_CPU_CXX, $CXX, g++, clang++, c++); the cpu "
        "platform compiles kernels with the host C++ compiler"
    )


@functools.cache
def host_signature() -> str:
    """The host CPU (model and feature flags): code built with -march=native runs only here."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return os.uname().machine
    first = text.split("\n\n", 1)[0]
    lines = [
        line for line in first.splitlines() if line.split(":")[0].strip() in {"model name", "flags"}
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def cache_dir() -> Path | None:
    """The cache directory (created), or None when it cannot be written."""
    explicit = os.environ.get("HIP_FFI_CPU_CACHE")
    if explicit:
        path = Path(explicit)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "hip-ffi" / "cpu"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def digest(*parts: str | bytes) -> str:
    """SHA-256 over `parts`, each length-prefixed (so ("ab", "c") != ("a", "bc"))."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


@functools.cache
def headers_digest() -> str:
    """Every header the generated code includes (the prelude and the executor)."""
    files = sorted(p for p in INCLUDE_DIR.rglob("*.h") if p.is_file())
    return digest(*(f"{p.relative_to(INCLUDE_DIR)}\0".encode() + p.read_bytes() for p in files))


def toolchain_key(compiler: Compiler, flags: tuple[str, ...]) -> str:
    """What every cache key starts with: ABI, compiler, flags, host CPU, our headers."""
    return digest(
        str(ABI_VERSION), compiler.path, compiler.banner, *flags, host_signature(), headers_digest()
    )


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def store(path: Path, data: bytes, record: dict[str, object]) -> None:
    """Write a cache entry and then its record (`record` plus the entry's size and SHA-256)."""
    write_atomically(path, data)
    checked = {**record, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    write_atomically(path.with_suffix(".json"), json.dumps(checked).encode())


def fetch(path: Path) -> tuple[bytes, dict[str, object]] | None:
    """A cache entry and its record, or None when either is missing or they disagree (the
    caller rebuilds it)."""
    try:
        record = json.loads(path.with_suffix(".json").read_text())
        data = path.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("size") != len(data):
        return None
    if record.get("sha256") != hashlib.sha256(data).hexdigest():
        return None
    return data, record


def run(command: list[str], cwd: Path, *, counted: bool = True) -> tuple[int, str]:
    """Run the compiler; returns (exit status, its diagnostics). `counted`: a build, counted in
    `stats["compiles"]` (a dependency check is not)."""
    if counted:
        count("compiles")
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return 1, f"the compiler did not finish within {COMPILE_TIMEOUT_S} s"
    except OSError as error:
        return 1, f"could not run the compiler: {error}"
    return done.returncode, done.stderr + done.stdout


_private_dir: Path | None = None


def private_dir() -> Path:
    """A directory for this process's builds when there is no cache directory."""
    global _private_dir
    if _private_dir is None:
        _private_dir = Path(tempfile.mkdtemp(prefix="hip-ffi-cpu-"))
    return _private_dir


def build_runtime() -> Path:
    """The runtime library (native/hip_cpu_runtime.cpp), built once and cached.

    Raises RuntimeError with the compiler's output when it cannot be built.
    """
    compiler = find_compiler()
    if compiler is None:
        raise RuntimeError(no_compiler_message())
    source = NATIVE_DIR / "hip_cpu_runtime.cpp"
    key = digest(toolchain_key(compiler, BASE_FLAGS), source.read_bytes())
    directory = cache_dir() or private_dir()
    target = directory / f"runtime-{key[:32]}.so"
    if fetch(target) is not None:  # dlopen()ed by path: only once it is known whole
        count("cache_hits")
        return target
    try:
        with tempfile.TemporaryDirectory(prefix="hip-ffi-cpu-build-") as work:
            output = Path(work) / "runtime.so"
            command = [compiler.path, *BASE_FLAGS, f"-I{INCLUDE_DIR}", str(source), "-o",
                       str(output)]  # fmt: skip
            status, log = run(command, Path(work))
            if status != 0:
                raise RuntimeError(f"building the cpu runtime library failed:\n{log}")
            store(target, output.read_bytes(), {})
    except OSError as error:
        raise RuntimeError(f"building the cpu runtime library failed: {error}") from error
    return target
