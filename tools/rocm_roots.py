"""Prepare one unpacked Debian root per ROCm release, for the `rocm-matrix` nox session.

Each root is built without a chroot and without touching the host's apt state: apt gets a
private configuration (its own sources list naming the suite, lists and cache directories, and
an **empty dpkg status file**, so the suite's newer libc6 and libstdc++6 are resolved as
dependencies instead of being taken as already installed) and resolves the release's packages
with every dependency (`--no-install-recommends`). Each package is then either

- downloaded whole by `apt-get download` (apt checks its SHA-256 against the signed index)
  and unpacked with `dpkg-deb -x` into `<cache>/<suite>/root`, or
- read in part (READ_IN_PART: rocBLAS, rocSOLVER, RCCL, 125-630 MB each, almost all of it GPU
  code inside the shared object): tools/deb_stream.py extracts its shared objects without
  their `.hip_fatbin` section, fetching a few xz blocks of the .deb by HTTP Range (2-30 MB of
  it). Those packages' hashes cannot be checked, only each xz block's own check.

The host's Python then runs inside the root through the root's own loader (`rocm_matrix_env`
in noxfile.py), where hipBLAS, MIOpen and RCCL load for real: no device means no device code
is ever read.

A root is cached under `.nox/rocm/<suite>/`, keyed by its package list: a warm run reads one
stamp file per suite and downloads nothing. Any failure (no network, a suite or package gone)
raises: the matrix never skips a release it was asked for.

    python tools/rocm_roots.py [--cache DIR] [SUITE ...]   # prints "<suite> <root>" per line
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from deb_stream import extract_shared_objects

ARCHIVE = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / ".nox" / "rocm"
MULTIARCH = "usr/lib/x86_64-linux-gnu"
#: Packages read in part (tools/deb_stream.py), by name prefix: their shared objects without
#: the GPU code (97-99 % of each). MIOpen's find databases (libmiopen-tests-data, 59 MB, a
#: dependency of MIOpen 7.2) hold no shared object, so nothing of them is extracted.
READ_IN_PART = ("librocblas", "librocsolver", "librccl", "libmiopen-tests-data")
#: In a partial suite (experimental), the ROCm packages and their ROCm dependencies come from
#: it; everything else, libc6 first, from the base suite. Globs: apt matches a /regex/ pin
#: against every package of the suites, 5 s of CPU per apt call, globs about one.
ROCM_PACKAGES = "libamd* libhip* libhsa* libroc* libmiopen* librccl*"
#: Bumped when the way a root is built changes, so that cached roots are rebuilt.
LAYOUT = 2


@dataclass(frozen=True)
class Release:
    """One Debian suite's ROCm: what to install and where apt takes it from.

    Attributes:
        suite: the suite the ROCm packages come from (trixie, sid, experimental).
        hip: the HIP release it carries, for messages and docs ("5.7").
        packages: the runtime, hiprtc and its builtins, comgr, the `-dev` headers the layout
            checks compile against, and the libraries the matrix loads (hipBLAS, MIOpen,
            RCCL); installed with every dependency.
        base: the suite the rest comes from when `suite` is a partial one (experimental).
        archs: the AMD GPU architectures hiprtc of that release must compile for.
        not_checked: what the matrix does not check on this release, with the reason; the
            test reports each as skipped with it ("MIOpen", "RCCL", an architecture).
    """

    suite: str
    hip: str
    packages: tuple[str, ...]
    base: str | None = None
    archs: tuple[str, ...] = ("gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1201")
    not_checked: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        parts = [ARCHIVE, self.suite, self.base or "", *sorted(self.packages)]
        text = "\n".join([*parts, f"layout {LAYOUT}", ROCM_PACKAGES, *READ_IN_PART])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


_HIPRTC_57_ABORTS = (
    "ROCm 5.7's hiprtc aborts the whole process (an LLVM fatal error, not a status) when asked"
    " for this architecture, which it predates: not asked"
)
_NO_RCCL_64 = (
    "Debian packages no RCCL for ROCm 6.4: sid's librccl1 is 5.4.3, built for libamdhip64-5,"
    " which sid no longer has"
)

RELEASES = {
    release.suite: release
    for release in (
        Release(
            "trixie",
            "5.7",
            (
                "libamdhip64-5", "libhiprtc-builtins5", "libamd-comgr2", "libamdhip64-dev",
                "libhipblas0", "librccl1",
            ),
            archs=("gfx90a", "gfx942", "gfx1030", "gfx1100"),
            not_checked={
                "MIOpen": "Debian packages no MIOpen for ROCm 5.7 (trixie)",
                **dict.fromkeys(("gfx950", "gfx1201"), _HIPRTC_57_ABORTS),
            },
        ),
        Release(
            "sid",
            "6.4",
            (
                "libamdhip64-6", "libhiprtc6", "libhiprtc-builtins6", "libamdhip64-dev",
                "libhipblas2", "libmiopen1",
            ),
            not_checked={"RCCL": _NO_RCCL_64},
        ),
        Release(
            "experimental",
            "7.2",
            (
                "libamdhip64-7", "libhiprtc7", "libhiprtc-builtins7", "libamd-comgr3",
                "libhsa-runtime64-1", "libamdhip64-dev", "libamd-comgr-dev", "libhsa-runtime-dev",
                "libhipblas3", "libmiopen1", "librccl1",
            ),
            base="sid",
        ),
    )
}  # fmt: skip


class RootError(RuntimeError):
    """A root could not be prepared (network, a suite or a package missing)."""


def apt_options(work: Path) -> list[str]:
    """apt-get/apt-cache options that confine apt to `work` (sources, lists, cache, status)."""
    return [
        "-o", f"Dir::Etc::SourceList={work / 'sources.list'}",
        "-o", f"Dir::Etc::SourceParts={work / 'sources.list.d'}",
        "-o", f"Dir::Etc::Preferences={work / 'preferences'}",
        "-o", f"Dir::Etc::PreferencesParts={work / 'preferences.d'}",
        "-o", f"Dir::State={work / 'state'}",
        "-o", f"Dir::State::Lists={work / 'lists'}",
        "-o", f"Dir::State::status={work / 'status'}",
        "-o", f"Dir::Cache={work / 'cache'}",
        "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
        "-o", "APT::Architecture=amd64", "-o", "APT::Architectures::=amd64",
        "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root",
        "-o", "Acquire::Languages=none",
        "-o", "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false",
        "-o", "Acquire::Retries=3",
    ]  # fmt: skip


def _configure(release: Release, work: Path) -> None:
    for sub in (
        "sources.list.d",
        "preferences.d",
        "state",
        "lists/partial",
        "cache/archives/partial",
    ):
        (work / sub).mkdir(parents=True, exist_ok=True)
    (work / "status").write_text("")  # nothing installed: libc6 and libstdc++6 come too
    suites = [release.suite] + ([release.base] if release.base else [])
    (work / "sources.list").write_text(
        "".join(f"deb [signed-by={KEYRING}] {ARCHIVE} {suite} main\n" for suite in suites)
    )
    preferences = ""
    if release.base:  # only the ROCm packages from the partial suite; the rest from the base
        preferences = f"Package: {ROCM_PACKAGES}\nPin: release a={release.suite}\n"
        preferences += "Pin-Priority: 990\n"
    (work / "preferences").write_text(preferences)


def _apt(tool: str, work: Path, *args: str, cwd: str | None = None) -> str:
    command = [tool, *apt_options(work), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise RootError(
            f"{' '.join([tool, *args])} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    return done.stdout


@dataclass(frozen=True)
class Deb:
    """One package of a root as apt resolved it; `size` in bytes, the .deb's."""

    name: str
    filename: str  # name_version_arch.deb, as apt prints it
    url: str
    size: int

    @property
    def in_part(self) -> bool:
        return self.name.startswith(READ_IN_PART)


def resolve(release: Release, work: Path) -> list[Deb]:
    """Every package of `release` with its dependencies, as apt would install them."""
    uris = _apt(
        "apt-get", work, "-q", "-y", "install", "--print-uris", "--no-install-recommends",
        *release.packages,
    )  # fmt: skip
    found = re.findall(r"^'(\S+)' (([^_\s]+)_\S+\.deb) (\d+) ", uris, re.MULTILINE)
    if not found:
        raise RootError(f"{release.suite}: apt planned no package:\n{uris[-4000:]}")
    return [Deb(name, filename, url, int(size)) for url, filename, name, size in found]


def _whole(release: Release, work: Path, root: Path, debs: list[Deb]) -> int:
    """Download `debs` with apt (hash-checked) and unpack them into `root`; bytes fetched.

    `apt-get download` takes each package's candidate version, the one the plan has: the
    file names must be the plan's."""
    archives = work / "cache" / "archives"
    _apt("apt-get", work, "-q", "download", *(d.name for d in debs), cwd=str(archives))
    files = sorted(archives.glob("*.deb"))
    got = sorted(file.name for file in files)
    planned = sorted(deb.filename for deb in debs)
    if got != planned:
        raise RootError(f"{release.suite}: apt fetched {got}, the plan was {planned}")
    for file in files:
        subprocess.run(["dpkg-deb", "-x", str(file), str(root)], check=True)
    return sum(file.stat().st_size for file in files)


def _in_part(release: Release, root: Path, debs: list[Deb], log: Callable[[str], object]) -> int:
    """Extract the shared objects of `debs` without their GPU code; bytes fetched."""
    fetched = 0
    for deb in debs:
        extracted = extract_shared_objects(deb.url, root)
        fetched += extracted.fetched
        log(f"{release.suite}: {deb.name} {extracted.fetched / 1e6:.0f} MB of"
            f" {deb.size / 1e6:.0f} MB read, {extracted.left_out / 1e6:.0f} MB of GPU code"
            f" left out: {', '.join(extracted.files) or 'no shared object'}")  # fmt: skip
    return fetched


def prepare(
    release: Release, cache: Path = DEFAULT_CACHE, log: Callable[[str], object] = print
) -> Path:
    """The unpacked root of `release`, built once and cached under `cache/<suite>/`."""
    work = cache.resolve() / release.suite
    root = work / "root"
    stamp = work / "ready"
    if stamp.exists() and stamp.read_text().strip() == release.key() and root.is_dir():
        return root
    clock = [time.monotonic()]

    def lap() -> float:  # seconds since the last lap
        clock.append(time.monotonic())
        return clock[-1] - clock[-2]

    if work.exists():
        shutil.rmtree(work)
    _configure(release, work)
    _apt("apt-get", work, "-q", "update")
    debs = resolve(release, work)
    whole = [deb for deb in debs if not deb.in_part]
    part = [deb for deb in debs if deb.in_part]
    root.mkdir()
    steps = [f"apt update and plan {lap():.0f} s"]
    fetched = _whole(release, work, root, whole)
    steps.append(f"{len(whole)} packages whole, {fetched / 1e6:.0f} MB, {lap():.0f} s")
    read = _in_part(release, root, part, log)
    size = sum(deb.size for deb in part) / 1e6
    steps.append(f"{len(part)} in part, {read / 1e6:.0f} MB read of {size:.0f}, {lap():.0f} s")
    loader = root / MULTIARCH / "ld-linux-x86-64.so.2"
    if not loader.exists():
        raise RootError(f"{release.suite}: no loader at {loader} after unpacking")
    shutil.rmtree(work / "cache")  # the unpacked root is what is kept
    shutil.rmtree(work / "lists")
    stamp.write_text(release.key() + "\n")
    total = clock[-1] - clock[0]
    log(f"{release.suite}: {'; '.join(steps)}: {(fetched + read) / 1e6:.0f} MB in {total:.0f} s")
    return root


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", action="store_true", help="one JSON object per root")
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"of {', '.join(RELEASES)}")
    args = parser.parse_args(argv)
    unknown = set(args.suites) - set(RELEASES)
    if unknown:
        parser.error(f"no such release: {', '.join(sorted(unknown))}")
    suites = args.suites or list(RELEASES)
    # The roots are prepared side by side: most of the time is waiting on the network.
    with ThreadPoolExecutor(max_workers=len(suites)) as pool:
        roots = list(pool.map(lambda suite: prepare(RELEASES[suite], args.cache, log=_log), suites))
    for suite, root in zip(suites, roots, strict=True):
        release = RELEASES[suite]
        if args.json:
            facts = {"suite": suite, "root": str(root), "hip": release.hip}
            facts |= {"archs": ",".join(release.archs), "not_checked": release.not_checked}
            print(json.dumps(facts))
        else:
            print(suite, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
