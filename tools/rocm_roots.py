"""Prepare one unpacked Debian root per ROCm release, for the `rocm-matrix` nox session.

Each root is built without a chroot and without touching the host's apt state: apt gets a
private configuration (its own sources list naming the suite, lists and cache directories, and
an **empty dpkg status file**, so the suite's newer libc6 and libstdc++6 are resolved as
dependencies instead of being taken as already installed), downloads the release's packages
with `apt-get install --download-only --no-install-recommends`, and every `.deb` is unpacked
with `dpkg-deb -x` into `<cache>/<suite>/root`. The host's Python then runs inside the root
through the root's own loader (`rocm_matrix_env` in noxfile.py).

A root is cached under `.nox/rocm/<suite>/`, keyed by its package list: a warm run reads one
stamp file per suite and downloads nothing. Any failure (no network, a suite or package gone)
raises: the matrix never skips a release it was asked for.

    python tools/rocm_roots.py [--cache DIR] [SUITE ...]   # prints "<suite> <root>" per line
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ARCHIVE = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_CACHE = Path(__file__).resolve().parents[1] / ".nox" / "rocm"
MULTIARCH = "usr/lib/x86_64-linux-gnu"


@dataclass(frozen=True)
class Release:
    """One Debian suite's ROCm: what to install and where apt takes it from.

    Attributes:
        suite: the suite the ROCm packages come from (trixie, sid, experimental).
        hip: the HIP release it carries, for messages and docs ("5.7").
        packages: the runtime, hiprtc and its builtins, comgr, and the `-dev` headers the
            layout checks compile against; installed with every dependency.
        loose: libraries downloaded without their dependencies (hipBLAS needs rocBLAS and
            rocSOLVER, 170-320 MB each per release): checked by their ELF symbols, not loaded.
        base: the suite the rest comes from when `suite` is a partial one (experimental).
        archs: the AMD GPU architectures hiprtc of that release must compile for.
    """

    suite: str
    hip: str
    packages: tuple[str, ...]
    loose: tuple[str, ...] = ()
    base: str | None = None
    archs: tuple[str, ...] = ("gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1201")

    def key(self) -> str:
        text = "\n".join(
            [ARCHIVE, self.suite, self.base or "", *sorted(self.packages), "--", *self.loose]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


RELEASES = {
    release.suite: release
    for release in (
        Release(
            "trixie",
            "5.7",
            (
                "libamdhip64-5", "libhiprtc-builtins5", "libamd-comgr2", "libamdhip64-dev",
            ),
            loose=("libhipblas0",),
            archs=("gfx90a", "gfx942", "gfx1030", "gfx1100"),  # gfx950, gfx1201: hiprtc aborts
        ),
        Release(
            "sid",
            "6.4",
            (
                "libamdhip64-6", "libhiprtc6", "libhiprtc-builtins6", "libamdhip64-dev",
            ),
            loose=("libhipblas2", "libmiopen1"),
        ),
        Release(
            "experimental",
            "7.2",
            (
                "libamdhip64-7", "libhiprtc7", "libhiprtc-builtins7", "libamd-comgr3",
                "libhsa-runtime64-1", "libamdhip64-dev", "libamd-comgr-dev", "libhsa-runtime-dev",
            ),
            loose=("libhipblas3", "libmiopen1"),
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
        rocm = " ".join(sorted((*release.packages, *release.loose)))
        preferences = f"Package: {rocm}\nPin: release a={release.suite}\nPin-Priority: 990\n"
    (work / "preferences").write_text(preferences)


def _apt(tool: str, work: Path, *args: str, cwd: str | None = None) -> str:
    command = [tool, *apt_options(work), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise RootError(
            f"{' '.join([tool, *args])} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    return done.stdout


def prepare(
    release: Release, cache: Path = DEFAULT_CACHE, log: Callable[[str], object] = print
) -> Path:
    """The unpacked root of `release`, built once and cached under `cache/<suite>/`."""
    work = cache.resolve() / release.suite
    root = work / "root"
    stamp = work / "ready"
    if stamp.exists() and stamp.read_text().strip() == release.key() and root.is_dir():
        return root
    started = time.monotonic()
    if work.exists():
        shutil.rmtree(work)
    _configure(release, work)
    _apt("apt-get", work, "-q", "update")
    _apt(
        "apt-get", work, "-q", "-y", "install", "--download-only", "--no-install-recommends",
        *release.packages,
    )  # fmt: skip
    if release.loose:  # `download` fetches exactly these .debs, no dependency
        _apt("apt-get", work, "-q", "download", *release.loose, cwd=str(work / "cache/archives"))
    debs = sorted((work / "cache" / "archives").glob("*.deb"))
    if not debs:
        raise RootError(f"{release.suite}: apt downloaded no packages")
    root.mkdir()
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    loader = root / MULTIARCH / "ld-linux-x86-64.so.2"
    if not loader.exists():
        raise RootError(f"{release.suite}: no loader at {loader} after unpacking")
    size = sum(deb.stat().st_size for deb in debs) / 1e6
    shutil.rmtree(work / "cache")  # the unpacked root is what is kept
    shutil.rmtree(work / "lists")
    stamp.write_text(release.key() + "\n")
    log(f"{release.suite}: {len(debs)} packages, {size:.0f} MB, {time.monotonic() - started:.0f} s")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", action="store_true", help="one JSON object per root")
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"of {', '.join(RELEASES)}")
    args = parser.parse_args(argv)
    unknown = set(args.suites) - set(RELEASES)
    if unknown:
        parser.error(f"no such release: {', '.join(sorted(unknown))}")
    for suite in args.suites or list(RELEASES):
        root = prepare(RELEASES[suite], args.cache, log=lambda line: print(line, file=sys.stderr))
        release = RELEASES[suite]
        if args.json:
            facts = {"suite": suite, "root": str(root), "hip": release.hip}
            print(json.dumps({**facts, "archs": ",".join(release.archs)}))
        else:
            print(suite, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
