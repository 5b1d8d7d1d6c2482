"""hiprtc on the cpu platform: HIP C++ compiled by the host C++ compiler.

A program is compiled in a private temporary directory (its headers written beside it) in two
passes: the preprocessor finds the kernels and extern shared arrays (source_scan.py), then
the compiler builds the program, the executor and one entry point per kernel into a shared
object, with hip_cpu_prelude.h force-included. That shared object *is* the code object
(hiprtcGetCode), loadable with hipModuleLoadData. Diagnostics come back as the program log,
with file names as the program named them. Name expressions (hiprtcAddNameExpression, before
the compile) get entry points of their own; their lowered name is the expression in canonical
form (source_scan.canonical), which hipModuleGetFunction takes. HIP's deprecated spellings
(hip_ffi.rtc.DEPRECATED_SPELLINGS) are force-included after the prelude. Results are cached on
disk (toolchain.py): the key covers the compiler, flags, host CPU, prelude, program, headers,
options and name expressions; the files it read from disk (through -I, by path, by a computed
include) are recorded with their hashes and checked on every hit, with the preprocessor run
again where a header could have appeared (dependencies.py).

Options: -D, -U, -I (attached, as the next option: "-I", "dir", or as --define-macro= /
--undefine-macro= / --include-path=; a relative -I directory is resolved against the process's
working directory at the compile, as hiprtc does, not the temporary one the compiler runs in),
-O0..-O3/-Os, -std=/--std= (C++17 at least), -ffast-math/--use_fast_math, -g, -w, -W....
GPU code-generation options (--offload-arch=, --gpu-architecture=, -arch=, -fgpu-rdc, -mcumode,
-ftz=, -prec-div=, ...) are accepted and have no effect: there is one target, the host.
-mwavefrontsize64 / -mno-wavefrontsize64 choose warps of 64 / 32 lanes for the program (as on
AMD's gfx10+); without either, the warp size is HIP_FFI_CPU_WARP_SIZE's (toolchain.warp_size).
Anything else is HIPRTC_ERROR_INVALID_OPTION.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from hip_cpu import dependencies, fission, images, source_scan, toolchain
from hip_ffi._ffi import ffi
from hip_ffi.constants import HIPRTC_RESULTS
from hip_ffi.handles import Registry, c_string, is_null, items, takes_handle
from hip_ffi.rtc import DEPRECATED_SPELLINGS

SUCCESS = HIPRTC_RESULTS["HIPRTC_SUCCESS"]
INVALID_INPUT = HIPRTC_RESULTS["HIPRTC_ERROR_INVALID_INPUT"]
INVALID_PROGRAM = HIPRTC_RESULTS["HIPRTC_ERROR_INVALID_PROGRAM"]
INVALID_OPTION = HIPRTC_RESULTS["HIPRTC_ERROR_INVALID_OPTION"]
COMPILATION = HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"]
INTERNAL_ERROR = HIPRTC_RESULTS["HIPRTC_ERROR_INTERNAL_ERROR"]
NAMES_AFTER_COMPILE = HIPRTC_RESULTS["HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION"]
NAMES_BEFORE_COMPILE = HIPRTC_RESULTS["HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION"]
NAME_NOT_VALID = HIPRTC_RESULTS["HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID"]
COMPAT_HEADER = "hip_ffi_deprecated.h"  # written beside the program, force-included

_IGNORED = re.compile(
    r"(--offload-arch=|--gpu-architecture=|-arch=|--gpu-max-threads-per-block=|-ftz=|--ftz=|"
    r"-prec-div=|-prec-sqrt=|-fmad=|--fmad=|-rdc=|--relocatable-device-code=|-dopt=|-maxrregcount=|"
    r"--maxrregcount=|-mcode-object-version=).*|-fgpu-rdc|-fno-gpu-rdc|-mcumode|-mno-cumode|"
    r"-munsafe-fp-atomics|-mno-unsafe-fp-atomics|-lineinfo|"
    r"--generate-line-info|-default-device|--device-debug|-G|-dlto|-ewp|-restrict|"
    r"--extensible-whole-program|-fno-gpu-flush-denormals-to-zero|-fgpu-flush-denormals-to-zero|"
    r"-fhip-new-launch-api|-fno-hip-new-launch-api"
)
_WAVEFRONT = {"-mwavefrontsize64": 64, "-mno-wavefrontsize64": 32}
#: Options whose value may come as the next option ("-I", "dir"), and their short spelling.
_SEPARATE = {"-I": "-I", "-D": "-D", "-U": "-U", "--include-path": "-I", "--define-macro": "-D",
             "--undefine-macro": "-U"}  # fmt: skip
_PASSED = re.compile(r"-[DUI].+|-O[0-3s]|-g|-w|-W[\w=+-]+|-ffast-math")
#: Part of every cache key: bump it when the commands below change what a build produces.
RECIPE = "4"  # 2: the source goes as ./name (a name is never an option); 3: name expressions;
# 4: kernels split at their barriers (fission.py)
_OLD_STANDARDS = {"c++03", "c++11", "c++14", "gnu++11", "gnu++14"}


class OptionError(ValueError):
    pass


def parse_options(options: list[str]) -> list[str]:
    """The compiler flags for hiprtc `options`; raises OptionError for an unknown one."""
    flags: list[str] = []
    warp = toolchain.warp_size()
    pending: str | None = None  # "-I" (say) whose value is the next option
    for option in options:
        if pending is not None:
            option, pending = pending + option, None
        elif option in _SEPARATE:
            pending = _SEPARATE[option]
            continue
        if option in _WAVEFRONT:
            warp = _WAVEFRONT[option]
            continue
        for long, short in (
            ("--define-macro=", "-D"),
            ("--undefine-macro=", "-U"),
            ("--include-path=", "-I"),
        ):
            if option.startswith(long):
                option = short + option[len(long) :]
        if option.startswith("-I") and len(option) > 2:
            # As hiprtc, relative to the caller's directory, not the temporary one it builds in.
            option = "-I" + os.path.join(os.getcwd(), option[2:])
        if option.startswith(("-std=", "--std=")):
            standard = option.split("=", 1)[1]
            if standard not in _OLD_STANDARDS:  # older ones: the prelude needs C++17
                flags.append(f"-std={standard}")
        elif option in ("--use_fast_math", "-use_fast_math"):
            flags.append("-ffast-math")
        elif _PASSED.fullmatch(option):
            flags.append(option)
        elif not _IGNORED.fullmatch(option):
            raise OptionError(f"hiprtc (cpu): unknown option {option!r}")
    if pending is not None:
        raise OptionError(f"hiprtc (cpu): option {pending!r} needs a value after it")
    return [f"-DHIPCPU_WARP_SIZE={warp}", *flags]


class Program:
    def __init__(self, source: str, name: str, headers: dict[str, str]) -> None:
        self.source = source
        self.name = name
        self.headers = headers
        self.log = ""
        self.code: bytes | None = None
        self.compiled = False  # a compile was attempted: no name expressions from now on
        self.names: dict[str, str] = {}  # name expression -> its canonical form
        self.lowered: dict[str, Any] = {}  # canonical form -> char[] handed out


PROGRAMS: Registry[Program] = Registry("hiprtcProgram")


def _compiled(handle: Any) -> Program | None:
    """The program behind `handle` if it compiled: for the calls that read the code, a program
    without code is an invalid program (as hiprtc answers)."""
    program = PROGRAMS.get(handle)
    return program if program is not None and program.code is not None else None


on_program = takes_handle(PROGRAMS.get, INVALID_PROGRAM)
on_compiled = takes_handle(_compiled, INVALID_PROGRAM)


def _file_name(name: str) -> str:
    base = Path(name).name
    return base if base and base not in (".", "..") else "hiprtc_program.hip"


def _clean(log: str, work: Path, source: str) -> str:
    """The compiler's diagnostics with file names as the program named them."""
    log = log.replace(f"{work}/", "").replace(str(toolchain.INCLUDE_DIR), "<hip-ffi cpu>")
    return log.replace(f"./{source}", source)


def compile_program(program: Program, flags: list[str]) -> tuple[bytes | None, str]:
    """(code object or None, log)."""
    compiler = toolchain.find_compiler()
    if compiler is None:
        return None, toolchain.no_compiler_message()
    all_flags = (*toolchain.BASE_FLAGS, *flags)
    headers = sorted(program.headers.items())
    names = list(dict.fromkeys(program.names.values()))
    key = toolchain.digest(
        toolchain.toolchain_key(compiler, all_flags),
        RECIPE,
        DEPRECATED_SPELLINGS,
        program.name,
        program.source,
        f"split {fission.enabled()}",
        *(part for pair in headers for part in pair),
        "name expressions",
        *names,
    )
    directory = toolchain.cache_dir()
    cached = directory / f"kernel-{key[:40]}.so" if directory else None
    entry = toolchain.fetch(cached) if cached is not None else None
    # A hit: whole (size and hash as recorded), every file it read unchanged, and where a header
    # could have appeared since, the same files read again (dependencies.py); else rebuilt.
    if entry is not None and not dependencies.unchanged(entry[1].get("dependencies")):
        entry = None
    if entry is not None and not dependencies.needs_rescan(entry[1], flags):
        toolchain.count("cache_hits")
        return entry[0], str(entry[1].get("log", ""))
    with tempfile.TemporaryDirectory(prefix="hip-ffi-hiprtc-") as temporary:
        work = Path(temporary)
        for name, text in headers:
            path = (work / name).resolve()
            if not path.is_relative_to(work.resolve()):
                return None, f"hiprtc (cpu): header name {name!r} leaves the program directory"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        source = work / _file_name(program.name)
        source.write_text(program.source)
        (work / COMPAT_HEADER).write_text(DEPRECATED_SPELLINGS)
        common = [
            compiler.path,
            *all_flags,
            "-x", "c++",
            f"-I{work}", f"-I{toolchain.INCLUDE_DIR}",
            "-include", "hip_cpu_prelude.h", "-include", COMPAT_HEADER,
        ]  # fmt: skip
        # The source always goes as ./name: a program named "-v" or "--help" is a file, never
        # an option of the compiler.
        given = f"./{source.name}"
        scanned = work / "scan.d"
        scan = [*common, "-E", "-DHIPCPU_SCAN", *dependencies.depfile_flags(scanned), given]
        if entry is not None:
            if dependencies.rescan_agrees(entry[1], [*scan, "-o", os.devnull], scanned, work):
                toolchain.count("cache_hits")
                return entry[0], str(entry[1].get("log", ""))
            scanned.unlink(missing_ok=True)
        status, output = toolchain.run(scan, work)
        if status != 0:
            return None, _clean(output, work, source.name)
        kernels = source_scan.find_kernels(output) + names
        entries = source_scan.entry_points(kernels, source_scan.find_dynamic_shared(output))
        split = _split(source, given, kernels, flags, work, compiler)
        depfile = work / "program.d"
        library = work / "program.so"
        command = [*common, *dependencies.depfile_flags(depfile), given, "-o", str(library)]
        if split:  # kernels split at their barriers; if that does not build, unsplit
            source.write_text(split[0] + fission.trait_lines(split[1]) + entries)
            status, log = toolchain.run([*command, "-Wl,-z,defs"], work)
            if status != 0 and fission.logging():
                print(f"hip-ffi cpu split: the split did not build:\n{log}", file=sys.stderr)
        if not split or status != 0:
            source.write_text(program.source + entries)
            status, log = toolchain.run([*command, "-Wl,-z,defs"], work)
        log = _clean(log, work, source.name)
        if status != 0:
            return None, log
        code = images.seal(library.read_bytes())
        if cached is not None:
            try:
                read = dependencies.user_files(scanned, work)
                every = sorted({*read, *dependencies.user_files(depfile, work)})
                info = {"log": log, "dependencies": dependencies.record(every), "scanned": read}
                toolchain.store(cached, code, dict(info))
            except OSError:
                pass  # a full or read-only cache only costs a rebuild next time
        return code, log


def _split(
    source: Path, given: str, kernels: list[str], flags: list[str], work: Path,
    compiler: toolchain.Compiler,
) -> tuple[str, list[str]] | None:  # fmt: skip
    """The program with its kernels split at their barriers (fission.py), and their names;
    None when none is (or splitting is off, or libclang is missing)."""
    if not fission.enabled():
        return None
    parse_flags = [f for f in flags if f.startswith(("-D", "-U", "-I", "-std="))]
    parse_flags += ["-include", str(work / COMPAT_HEADER)]  # hipThreadIdx_x, ... as compiled
    try:
        text, names, _ = fission.split_program(
            source, given, kernels, parse_flags, [str(work), str(toolchain.INCLUDE_DIR)],
            toolchain.builtin_include(compiler), str(toolchain.INCLUDE_DIR),
        )  # fmt: skip
    except Exception as error:
        if fission.logging():
            print(f"hip-ffi cpu split: failed: {error!r}", file=sys.stderr)
        return None
    return (text, names) if names else None


# ---- the surface ---------------------------------------------------------------------------


def hiprtcVersion(major: Any, minor: Any) -> int:
    """The host compiler's version (it is what compiles programs here)."""
    if major == ffi.NULL or minor == ffi.NULL:
        return INVALID_INPUT
    compiler = toolchain.find_compiler()
    major[0], minor[0] = (compiler.major, compiler.minor) if compiler else (0, 0)
    return SUCCESS


def hiprtcCreateProgram(
    program: Any, source: Any, name: Any, count: int, headers: Any, names: Any
) -> int:
    text = c_string(source)
    if is_null(program) or text is None or count < 0:
        return INVALID_INPUT
    if count and (is_null(headers) or is_null(names)):
        return INVALID_INPUT
    header_names = [c_string(n) for n in items(names, count)]
    header_texts = [c_string(h) for h in items(headers, count)]
    pairs = zip(header_names, header_texts, strict=True)
    included = {n: h for n, h in pairs if n and h is not None}
    if len(included) != count:
        return INVALID_INPUT
    created = Program(text, c_string(name) or "hiprtc_program.hip", included)
    program[0] = PROGRAMS.cdata(PROGRAMS.add(created))
    return SUCCESS


def hiprtcDestroyProgram(program: Any) -> int:
    if is_null(program) or PROGRAMS.remove(program[0]) is None:
        return INVALID_PROGRAM
    program[0] = ffi.NULL
    return SUCCESS


@on_program
def hiprtcCompileProgram(program: Program, count: int, options: Any) -> int:
    """Compile (or take from the disk cache); the log holds the compiler's diagnostics."""
    if count < 0 or (count and is_null(options)):
        return INVALID_INPUT
    given = [c_string(option) for option in items(options, count)]
    if None in given:
        return INVALID_INPUT
    try:
        flags = parse_options([option for option in given if option is not None])
    except OptionError as error:
        program.log = str(error)
        return INVALID_OPTION
    program.compiled = True
    try:
        program.code, program.log = compile_program(program, flags)
    except OSError as error:  # no temporary directory, a full disk, a compiler that wrote nothing
        program.code, program.log = None, f"hiprtc (cpu): could not compile: {error}"
        return INTERNAL_ERROR
    return SUCCESS if program.code is not None else COMPILATION


@on_program
def hiprtcAddNameExpression(program: Program, expression: Any) -> int:
    """Register a name expression (`k<64>`, `ns::k`) for the next compile: it gets an entry
    point, found under the lowered name hiprtcGetLoweredName gives after the compile."""
    text = c_string(expression)
    if not text or not text.strip():
        return INVALID_INPUT
    if program.compiled:
        return NAMES_AFTER_COMPILE
    program.names[text] = source_scan.canonical(text)
    return SUCCESS


@on_program
def hiprtcGetLoweredName(program: Program, expression: Any, lowered: Any) -> int:
    """The lowered name of a registered expression; the string lives as long as the program."""
    text = c_string(expression)
    if text is None or is_null(lowered):
        return INVALID_INPUT
    if program.code is None:
        return NAMES_BEFORE_COMPILE
    name = program.names.get(text)
    if name is None:
        return NAME_NOT_VALID
    kept = program.lowered.setdefault(name, ffi.new("char[]", name.encode()))
    lowered[0] = kept
    return SUCCESS


@on_program
def hiprtcGetProgramLogSize(program: Program, size: Any) -> int:
    """Bytes of the log including its terminating NUL."""
    return _size(size, program.log.encode() + b"\0")


@on_program
def hiprtcGetProgramLog(program: Program, log: Any) -> int:
    return _copy(log, program.log.encode() + b"\0")


@on_compiled
def hiprtcGetCodeSize(program: Program, size: Any) -> int:
    return _size(size, program.code or b"")


@on_compiled
def hiprtcGetCode(program: Program, code: Any) -> int:
    return _copy(code, program.code or b"")


def _size(out: Any, data: bytes) -> int:
    """`*out = len(data)`, HIPRTC_ERROR_INVALID_INPUT for a NULL `out`."""
    if out == ffi.NULL:
        return INVALID_INPUT
    out[0] = len(data)
    return SUCCESS


def _copy(out: Any, data: bytes) -> int:
    """`data` into the caller's buffer (sized by the matching *Size call)."""
    if is_null(out):
        return INVALID_INPUT
    ffi.memmove(out, data, len(data))
    return SUCCESS
