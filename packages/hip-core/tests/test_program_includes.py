"""Programs and the files they include: include options in every form, relative include
directories, and a cache that never serves code built from a header that has since changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Program, includes

SOURCE = """
extern "C" __global__ void fill_index(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * SCALE;
}
"""
COMPUTED = '#define CONFIG "cfg.h"\n#include CONFIG\n' + SOURCE  # the name comes from a macro
LITERAL = '#include "cfg.h"\n' + SOURCE


def _config(directory: Path, scale: int) -> Path:
    """`directory` (created) with cfg.h defining SCALE."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cfg.h").write_text(f"#define SCALE {scale}\n")
    return directory


def _scale(program: Program, device: Device) -> int:
    """SCALE as the loaded program has it: what fill_index writes at index 1."""
    out = device.allocate(2 * 4)
    program.load(device).get_kernel("fill_index").launch(1, 2, out, 2)
    device.synchronize()
    got = np.empty(2, np.int32)
    out.copy_to(got)
    return int(got[1])


def test_an_edited_computed_include_compiles_again(
    device: Device, cache_dir: Path, tmp_path: Path
) -> None:
    include = _config(tmp_path / "include", 1)
    options = [f"-I{include}"]
    assert _scale(Program(COMPUTED, options=options), device) == 1
    _config(include, 2)  # the header the macro names changes
    assert _scale(Program(COMPUTED, options=options), device) == 2
    # The scan cannot tell which file `#include CONFIG` reads: such a program is not cached.
    assert Program(COMPUTED, options=options).cache_key(device.arch) is None
    assert list(cache_dir.glob("*.bin")) == []


@pytest.mark.parametrize(
    "source", [COMPUTED, '#include "cfg.h"\n' + SOURCE], ids=["macro", "literal"]
)
def test_a_header_that_now_shadows_a_later_one_is_compiled_in(
    device: Device, cache_dir: Path, tmp_path: Path, source: str
) -> None:
    later = _config(tmp_path / "later", 1)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    options = [f"-I{earlier}", f"-I{later}"]
    assert _scale(Program(source, options=options), device) == 1
    _config(earlier, 5)  # found first from now on; the file compiled before did not change
    assert _scale(Program(source, options=options), device) == 5


def test_a_relative_include_dir_is_resolved_against_the_working_directory_at_compile_time(
    device: Device, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(tmp_path / "one" / "include", 3)
    _config(tmp_path / "two" / "include", 4)
    program = Program(LITERAL, options=["-Iinclude"])
    monkeypatch.chdir(tmp_path / "one")
    assert _scale(program, device) == 3
    monkeypatch.chdir(tmp_path / "two")  # the same options, another directory: another entry
    assert _scale(program, device) == 4
    assert len(list(cache_dir.glob("*.bin"))) == 2


@pytest.mark.parametrize(
    "form",
    [["-I", "{}"], ["-I {}"], ["--include-path", "{}"], ["--include-path={}"], ["-I{}"]],
    ids=["-I dir (two)", "-I dir (one)", "--include-path dir", "--include-path=", "-Idir"],
)
def test_every_include_option_form_compiles(
    device: Device, cache_dir: Path, tmp_path: Path, form: list[str]
) -> None:
    include = _config(tmp_path / "include", 6)
    options = [part.format(include) for part in ["-DUNUSED=1", *form, "-O2"]]
    program = Program(LITERAL, options=options)
    assert _scale(program, device) == 6
    # One spelling for the compiler and the key, whichever form came in.
    assert includes.resolved_options(options) == ("-DUNUSED=1", f"-I{include}", "-O2")
    same = Program(LITERAL, options=["-DUNUSED=1", f"-I{include}", "-O2"])
    assert program.cache_key(device.arch) == same.cache_key(device.arch)


def test_include_options_that_cannot_work_fail_clearly(
    device: Device, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"'nowhere' \(relative to .*\) does not exist"):
        Program(SOURCE, options=["-DSCALE=1", "-I", "nowhere"]).compile(device)
    (tmp_path / "file.h").write_text("")
    with pytest.raises(NotADirectoryError, match=r"'file\.h'.* is not a directory"):
        Program(SOURCE, options=["-DSCALE=1", "-Ifile.h"]).compile(device)
    with pytest.raises(ValueError, match="'-I' is the last one"):
        Program(SOURCE, options=["-DSCALE=1", "-I"])
    for empty in (["--include-path="], ["-I", ""], ["-I "]):
        with pytest.raises(ValueError, match="names no directory"):
            Program(SOURCE, options=empty)  # not the working directory by accident
    with pytest.raises(TypeError, match="sequence of str"):
        Program(SOURCE, options="-DSCALE=1")  # a str is not a list of options
    assert list(cache_dir.glob("*.bin")) == []


def test_the_scan_names_what_it_cannot_follow(tmp_path: Path) -> None:
    include = _config(tmp_path / "include", 1)
    (include / "probe.h").write_text("")

    def scan(source: str, *options: str) -> tuple[list[str], tuple[str, ...]]:
        found = includes.scan_includes(source, [f"-I{include}", *options], {}, name="p.hip")
        return [Path(path).name for path, _ in found.files], found.unfollowed

    # Followed: literal names, whatever the directive; probes too (a new file changes the key).
    assert scan('#include_next <cfg.h>\n#if __has_include("probe.h")\n#endif\n') == (
        ["cfg.h", "probe.h"],
        (),
    )
    assert scan('#  import "cfg.h"\n') == (["cfg.h"], ())
    for unfollowable in [
        "#include CONFIG",
        "#include STR(cfg.h)",
        '#include /* a comment */ "cfg.h"',
        "#if __has_include(CONFIG)\n#endif",
        '#embed "cfg.h"',
    ]:
        assert scan(unfollowable)[1], unfollowable
    for option in ["-include", "-isystem/usr/include", "--pre-include=cfg.h", "@options.txt"]:
        assert scan("", option)[1] == (f"option {option!r}",)


@pytest.mark.parametrize(
    "form",
    [["-I", "include"], ["-I include"], ["--include-path=include"], ["--include-path", "include"]],
    ids=["-I dir (two)", "-I dir (one)", "--include-path=", "--include-path dir"],
)
def test_amd_hiprtc_gets_include_options_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: list[str]
) -> None:
    """ROCm's hiprtc (5.2 here, no device needed to compile) reads `--include-path=d` as
    `--include` of `-path=d` and `"-I d"` as the directory " d": hip-core hands it -I<path>."""
    import hip_ffi
    from hip_core import use_platform
    from hip_ffi.errors import LibraryNotFoundError

    try:
        hip_ffi.load("amd")
    except LibraryNotFoundError as error:
        pytest.skip(f"ROCm is not installed: {error}")
    monkeypatch.setenv("HIP_CORE_CACHE", "0")
    monkeypatch.chdir(tmp_path)
    _config(tmp_path / "include", 1)
    with use_platform("amd"):
        code, _ = Program(LITERAL, options=form)._compile("gfx90a")
    assert code[:4] == b"\x7fELF" and b"fill_index" in code
