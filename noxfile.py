"""Sessions for the hip-backend monorepo. `nox -l` lists them; plain `nox` runs the defaults.

Every test session installs *wheels*, never the source tree, so `tests(package='hip-core')`
proves that `pip install hip-core` works with nothing above it present.

The `gpu` sessions also run on a machine with no package registry and no venvs (the lent
NVIDIA H200): there, `nox --no-venv` uses the interpreter as it is and expects the packages to
be installed already from the wheelhouse that `nox -s wheelhouse` builds here. README.md has
the exact command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import nox

ROOT = Path(__file__).resolve().parent
VERSION = (ROOT / "VERSION").read_text().strip()
PACKAGES = ("hip-ffi", "hip-cpu", "hip-core", "hip-runtime", "hip-backend")  # bottom to top
WHEELS = ROOT / ".nox" / "_wheels"
WHEELHOUSE = ROOT / ".whl"  # what travels to the device machine (git ignores it)
# libclang: the cpu platform splits kernels at their barriers with it (hip-cpu[split]).
TEST_DEPS = ("pytest>=8", "hypothesis>=6", "numpy>=1.24", "libclang>=16")
# Reference implementations some packages' tests compare against (writers and dequantizers of
# the checkpoint formats); never dependencies of the packages themselves.
PACKAGE_TEST_DEPS: dict[str, tuple[str, ...]] = {
    "hip-core": ("ml_dtypes>=0.4",),  # the collectives tests' bf16 references
    "hip-runtime": ("safetensors>=0.4", "gguf>=0.10", "pytest-xdist>=3.5"),
    "hip-backend": ("safetensors>=0.4", "gguf>=0.10"),
}
# The device machine runs Python 3.12 on x86-64 Linux; these are the wheels it lacks.
DEVICE_PYTHON = "3.12"
DEVICE_EXTRA_WHEELS = ("cffi", "pycparser", "ml_dtypes", "gguf")

# tests/rocm_matrix runs only inside a ROCm release's root (the rocm-matrix session); elsewhere
# it is left out rather than collected as skips.
WHOLE_STACK_ONLY = "--ignore=tests/rocm_matrix"
nox.options.sessions = [
    "tests", "wave64", "integration", "rocm-matrix", "lint", "typecheck", "docs",
]  # fmt: skip
# The docs session's tools (mkdocstrings formats the separate signatures with ruff).
DOCS_DEPS = ("mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26", "ruff>=0.6")
nox.options.error_on_missing_interpreters = True


def _wheel_name(package: str) -> str:
    return f"{package.replace('-', '_')}-{VERSION}-py3-none-any.whl"


def build_wheels(session: nox.Session, dest: Path = WHEELS) -> dict[str, Path]:
    """Build every distribution's wheel into `dest` and return them by distribution name."""
    session.install("hatchling>=1.21", "cffi>=1.17")
    if dest.exists():
        for old in dest.glob("hip_*.whl"):
            old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        session.run(
            "python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
            "--wheel-dir", str(dest), str(ROOT / "packages" / package),
        )  # fmt: skip
    wheels = {package: dest / _wheel_name(package) for package in PACKAGES}
    missing = [str(path) for path in wheels.values() if not path.exists()]
    if missing:
        session.error(f"wheel build produced no {missing}")
    return wheels


def install_only(session: nox.Session, package: str) -> None:
    """Install `package` from its wheel, with exactly what it declares (siblings as wheels)."""
    wheels = build_wheels(session)
    extras = PACKAGE_TEST_DEPS.get(package, ())
    session.install("--find-links", str(WHEELS), str(wheels[package]), *TEST_DEPS, *extras)


# hip-runtime's cpu-platform suites spend most of their time in g++ compiling the kernels, one
# core a compile: pytest-xdist runs them on every core, each test file on one worker (the
# workers share one program cache: tests/conftest.py's program_cache). On a 2-core machine
# (CI's): tests(hip-runtime) 17 min serial, 9 min on two workers; wave64 10 min, 5.5.
PARALLEL = ("-n", "auto", "--dist", "loadfile")


def run_pytest(session: nox.Session, *paths: str, marker: str) -> None:
    # --import-mode=importlib keeps pytest from putting the source tree on sys.path: the
    # packages under test are the installed wheels.
    session.run(
        "python", "-m", "pytest", "--import-mode=importlib", "-m", marker, *paths, *session.posargs
    )


@nox.session
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """One distribution's tests, with only that distribution and its dependencies installed."""
    install_only(session, package)
    session.run("python", "tools/check_isolation.py", package)
    parallel = PARALLEL if package == "hip-runtime" else ()
    run_pytest(session, f"packages/{package}/tests", *parallel, marker="not gpu")


@nox.session
def wave64(session: nox.Session) -> None:
    """hip-runtime's op suite on the cpu platform with 64-lane warps (AMD CDNA's wavefront):
    every kernel compiled with warpSize 64, so each wave64 path runs somewhere without an AMD
    GPU. The hiprtc compile tests are left out: they do not depend on the host's warp size."""
    install_only(session, "hip-runtime")
    session.env["HIP_FFI_CPU_WARP_SIZE"] = "64"
    run_pytest(
        session,
        "packages/hip-runtime/tests",
        "--ignore=packages/hip-runtime/tests/test_kernels_compile.py",
        *PARALLEL,
        marker="not gpu",
    )


@nox.session
def integration(session: nox.Session) -> None:
    """The whole stack: every wheel installed together, tests/ at the root."""
    install_stack(session)
    run_pytest(session, "tests", WHOLE_STACK_ONLY, marker="not gpu")


def install_stack(session: nox.Session) -> None:
    """Every wheel together, with every package's test dependencies."""
    wheels = build_wheels(session)
    extras = {dep for deps in PACKAGE_TEST_DEPS.values() for dep in deps}
    session.install("--find-links", str(WHEELS), *map(str, wheels.values()), *TEST_DEPS, *extras)


@nox.session(tags=["gpu"], default=False)
@nox.parametrize("package", PACKAGES)
def gpu(session: nox.Session, package: str) -> None:
    """That package's `gpu`-marked tests. On a registry-less machine run with `--no-venv`."""
    if session.venv_backend != "none":
        install_only(session, package)
    tests = f"packages/{package}/tests"
    collected = session.run(
        "python", "-m", "pytest", "--import-mode=importlib", "--collect-only", "-q", "-m", "gpu",
        tests, success_codes=[0, 5], silent=True,
    )  # fmt: skip
    if collected is not None and "no tests collected" in str(collected):
        session.skip(f"{package} has no gpu-marked tests")
    run_pytest(session, tests, marker="gpu")


@nox.session(name="gpu-integration", tags=["gpu"], default=False)
def gpu_integration(session: nox.Session) -> None:
    """The whole stack's `gpu`-marked tests (tests/, the reliability suite on nvidia)."""
    if session.venv_backend != "none":
        install_stack(session)
    run_pytest(session, "tests", WHOLE_STACK_ONLY, marker="gpu")


@nox.session(name="rocm-matrix")
def rocm_matrix(session: nox.Session) -> None:
    """hip-ffi against every ROCm release Debian ships (5.7, 6.4, 7.2), each in its own root.

    tools/rocm_roots.py unpacks one root per release (cached under .nox/rocm/; a network or
    archive failure fails here, never skips); the root-independent layout test checks the
    cdefs against each release's headers, then tests/rocm_matrix runs inside every root,
    started through the root's own loader so its glibc and libstdc++ are the ones loaded. The
    releases run side by side (two cores: their hiprtc compiles dominate).
    """
    install_stack(session)
    out = session.run("python", "tools/rocm_roots.py", "--json", silent=True)
    lines = str(out).splitlines()
    session.log("\n".join(line for line in lines if not line.startswith("{")))  # timings
    releases = [json.loads(line) for line in lines if line.startswith("{")]
    if not releases:
        session.error(f"tools/rocm_roots.py gave no roots:\n{out}")
    headers = os.pathsep.join(str(Path(r["root"]) / "usr/include") for r in releases)
    session.run(
        "python", "-m", "pytest", "--import-mode=importlib", "-q",
        "packages/hip-ffi/tests/test_amd_layout.py", env={"HIP_FFI_EXTRA_HEADERS": headers},
    )  # fmt: skip
    python = str(Path(session.bin) / "python")
    started, running = time.monotonic(), []
    for release in releases:
        command = [
            *rocm_loader(release["root"]), python, "-m", "pytest", "--import-mode=importlib", "-v",
            "-p", "no:cacheprovider", "tests/rocm_matrix", "tests/hip_corpus/test_corpus_amd.py",
            *session.posargs,
        ]  # fmt: skip
        env = {**os.environ, **rocm_matrix_env(release)}
        log = (Path(release["root"]).parent / "pytest.log").open("w+")
        running.append((release, subprocess.Popen(command, env=env, stdout=log, stderr=log), log))
    failed = []
    for release, process, log in running:
        code = process.wait()
        log.seek(0)
        session.log(f"ROCm {release['hip']} ({release['suite']}), exit {code}:\n{log.read()}")
        log.close()
        if code != 0:
            failed.append(f"ROCm {release['hip']} ({release['suite']})")
    session.log(f"matrix: {len(releases)} releases in {time.monotonic() - started:.0f} s")
    if failed:
        session.error(f"the matrix failed on {', '.join(failed)}")


def rocm_loader(root: str) -> list[str]:
    """The command prefix that runs a host program on `root`'s glibc and libraries.

    LD_LIBRARY_PATH alone fails (the host's loader with the root's libc), so the root's own
    loader starts the program; the host's directory comes last, for what only the host has
    (the interpreter's own dependencies). Child processes fall back to the host's loader."""
    lib = Path(root) / "usr/lib/x86_64-linux-gnu"
    search = [str(lib), str(Path(root) / "usr/lib"), "/usr/lib/x86_64-linux-gnu"]
    return [str(lib / "ld-linux-x86-64.so.2"), "--library-path", ":".join(search)]


def rocm_matrix_env(release: dict[str, Any]) -> dict[str, str]:
    """What tests/rocm_matrix reads (its conftest.py), and hip-ffi's overrides naming the
    root's libraries (MIOpen's only where the release has one)."""
    lib = Path(release["root"]) / "usr/lib/x86_64-linux-gnu"
    env = {
        "HIP_PLATFORM": "amd",
        "AMD_COMGR_CACHE": "0",  # comgr 3 caches code objects on disk: compile every time
        "HIP_FFI_ROCM_ROOT": release["root"],
        "HIP_FFI_ROCM_RELEASE": release["hip"],
        "HIP_FFI_ROCM_ARCHS": release["archs"],
        "HIP_FFI_ROCM_NOT_CHECKED": json.dumps(release["not_checked"]),
        "HIP_FFI_AMDHIP64_PATH": str(lib / f"libamdhip64.so.{release['hip'].split('.')[0]}"),
    }
    for variable, stem in (
        ("HIP_FFI_HIPRTC_PATH", "libhiprtc"),
        ("HIP_FFI_HIPBLAS_PATH", "libhipblas"),
        ("HIP_FFI_MIOPEN_PATH", "libMIOpen"),
    ):
        found = sorted(lib.glob(f"{stem}.so.[0-9]"))
        if found:
            env[variable] = str(found[-1])
    return env


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy (strict) on every package's src/."""
    session.install("mypy>=1.10", "numpy>=1.24", "cffi>=1.17", "pytest>=8", "nox")
    session.run("mypy", *(f"packages/{p}/src" for p in PACKAGES), "noxfile.py", "tools")


@nox.session(default=False)
def wheelhouse(session: nox.Session) -> None:
    """Build our wheels plus the third-party wheels the device machine lacks into .whl/."""
    if WHEELHOUSE.exists():
        shutil.rmtree(WHEELHOUSE)
    build_wheels(session, WHEELHOUSE)
    platform = (
        "--only-binary=:all:", "--python-version", DEVICE_PYTHON, "--implementation", "cp",
        "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
        "--platform", "manylinux2014_x86_64", "--platform", "any", "--dest", str(WHEELHOUSE),
    )  # fmt: skip
    # --no-deps: numpy and the rest are on the device already; a second numpy would shadow them.
    session.run(
        "python", "-m", "pip", "download", "--quiet", "--no-deps", *platform, *DEVICE_EXTRA_WHEELS
    )
    session.run("python", "-m", "pip", "download", "--quiet", *platform, "nox")  # nox and its deps


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs.yml) into site/, every warning an error.

    mkdocstrings reads the packages' sources statically (packages/*/src): nothing is installed
    or imported, so no GPU, compiler or ROCm is needed."""
    session.install(*DOCS_DEPS)
    session.run(
        "mkdocs", "build", "--strict", "--clean", "--site-dir", str(ROOT / "site"),
        env={"NO_MKDOCS_2_WARNING": "1"},  # mkdocs-material's banner about its successor
    )  # fmt: skip


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Run the benchmarks under bench/ on the current platform; JSON lines plus a table each.

    Every script takes the harness's flags, so `nox -s bench -- --quick --out DIR` hands them
    to all of them (a script's own flags, such as bench_ops' --size, only make sense alone).
    """
    install_only(session, "hip-backend")
    scripts = sorted((ROOT / "bench").glob("bench_*.py"))
    if not scripts:
        session.error("no benchmarks under bench/")
    for script in scripts:
        session.run("python", str(script), *session.posargs)
