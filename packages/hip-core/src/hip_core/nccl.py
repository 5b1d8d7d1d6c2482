"""The library side of hip-core's collectives: NcclError and the unique ids that ranks share.

`UniqueId.new()` makes the id of a new communicator (ncclGetUniqueId); `rendezvous_file` hands
one to every rank through a file; `check_nccl` turns an ncclResult_t into an NcclError with
the library's own words. The communicators themselves are hip_core.collectives.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hip_core._checks import integer
from hip_core._hip import hip
from hip_core.errors import HipError
from hip_ffi.collective_constants import INTERNAL_ERROR, REMOTE_ERROR, RESULT_NAMES, SYSTEM_ERROR

ID_BYTES = 128
#: Failures after which the communicator cannot be used again (abort it).
_FATAL = frozenset((1, SYSTEM_ERROR, INTERNAL_ERROR, REMOTE_ERROR))


class NcclError(HipError):
    """A collective call failed (RCCL / NCCL / the cpu platform's implementation).

    `code` is the ncclResult_t, `name` its NCCL name ("ncclRemoteError"); the message has the
    library's error string (ncclGetErrorString) and what ncclGetLastError said. `recoverable`
    is False for system, internal, remote and device errors: abort the communicator then.
    """


def nccl_error(result: int, api: str, handle: Any = None) -> NcclError:
    """The NcclError of `result` returned by `api` (`handle`: the communicator, for its text)."""
    hip_api = hip()
    text = hip_api.ffi.string(hip_api.ncclGetErrorString(result)).decode(errors="replace")
    with contextlib.suppress(Exception):  # (ncclGetLastError is NCCL 2.13+: optional)
        last = hip_api.ncclGetLastError(hip_api.ffi.NULL if handle is None else handle)
        detail = hip_api.ffi.string(last).decode(errors="replace") if last else ""
        if detail:
            text = f"{text}: {detail}"
    name = RESULT_NAMES.get(result, f"ncclResult({result})")
    return NcclError(result, name, api, result not in _FATAL, text)


def check_nccl(result: int, api: str, handle: Any = None) -> None:
    """Raise the NcclError of `result` unless it is ncclSuccess (0)."""
    if result:
        raise nccl_error(result, api, handle)


@dataclass(frozen=True)
class UniqueId:
    """What the ranks of one communicator share to find each other (ncclUniqueId).

    Plain data that pickles: make it once (`UniqueId.new()`, on rank 0) and hand it to every
    rank by any means: a multiprocessing queue, a file (`rendezvous_file`), text (`hex()` /
    `fromhex()`) in torch.distributed's store, MPI. On nvidia and amd the process that made it
    must live until every rank has joined (NCCL's bootstrap listens in it): so rank 0 makes
    it, not a launcher that exits. One id makes one communicator.
    `platform` is where it was made: an id of another platform is a ValueError at use.
    """

    raw: bytes
    platform: str

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or len(self.raw) != ID_BYTES:
            raise ValueError(f"a UniqueId is {ID_BYTES} bytes")

    @classmethod
    def new(cls) -> UniqueId:
        """A new id (ncclGetUniqueId: on nvidia and amd this also starts the library's
        bootstrap listener in this process, which rank 0 must then be)."""
        api = hip()
        out = api.ffi.new("ncclUniqueId*")
        check_nccl(api.ncclGetUniqueId(out), "ncclGetUniqueId")
        return cls(bytes(api.ffi.buffer(out)), api.platform)

    def hex(self) -> str:
        """`platform:hex digits`, for environment variables and key-value stores."""
        return f"{self.platform}:{self.raw.hex()}"

    @classmethod
    def fromhex(cls, text: str) -> UniqueId:
        """The id that `hex()` wrote; ValueError for anything else."""
        platform, _, digits = text.strip().partition(":")
        if not digits:
            raise ValueError(f"not a UniqueId's hex(): {text[:40]!r}")
        return cls(bytes.fromhex(digits), platform)

    def __repr__(self) -> str:
        return f"UniqueId({self.platform}, {self.raw[:8].hex()}…)"


def rendezvous_file(path: str | os.PathLike[str], rank: int, *, timeout: float = 120.0) -> UniqueId:
    """A UniqueId shared through a file: rank 0 makes one and writes it to `path` (atomically:
    a rename), every other rank waits until the file is there (polling every 10 ms, at most
    `timeout` seconds: TimeoutError) and reads it. Use a fresh path per job (a stale file from
    an earlier run would hand out its dead id); a shared file system reaches other hosts."""
    target = Path(path)
    if integer(rank, "rank") == 0:
        unique_id = UniqueId.new()
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        partial.write_text(unique_id.hex())
        os.replace(partial, target)
        return unique_id
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(FileNotFoundError):
            return UniqueId.fromhex(target.read_text())
        if time.monotonic() >= deadline:
            raise TimeoutError(f"rank {rank}: no unique id in {target} after {timeout:g} s")
        time.sleep(0.01)
