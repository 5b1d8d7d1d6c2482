"""Where the ranks of a cpu-platform communicator meet: a shared file, its layout and waits.

A unique id (ncclUniqueId, 128 bytes) is `MAGIC`, 16 random bytes and a folder (/dev/shm, else
the temporary folder): it names the file `<folder>/hip-ffi-nccl-<token>`, which every rank of
the communicator opens, in this process or another, and maps shared. So an id handed over by any
means (a pickle, a file, torch's store, MPI) reaches the same memory; the cpu platform is one
host, so every rank must be on it. The file is unlinked by rank 0 once every rank has opened
it, so nothing is left behind by a communicator that formed.

Layout for n ranks, all of it reserved when the first rank creates the file (a full /dev/shm
is then an error at the rendezvous, never a SIGBUS later): 2 ranks take 9 MiB, 4 ranks 20 MiB:
- one control block of 32 uint64 words per rank: state, pid, process start time, rank count,
  barrier phase, the signature of its current collective (so mismatched calls are told);
- one channel of 8 words per (sender, receiver) pair, for ncclSend / ncclRecv;
- a staging area of `STAGING_BYTES` per rank, where collectives put their contributions;
- a mailbox of `MAILBOX_BYTES` per pair, where a send leaves a chunk for its receiver.
Each word has one writer (its rank, or one side of a channel), and others poll it.

Waiting never hangs: every wait ends, with a `PeerFailure`, when a rank it waits for has left
(ncclCommDestroy), failed or aborted (ncclRemoteError), when that rank's process has exited (its
pid is gone, a zombie, or another process's; checked every `LIVENESS_SECONDS`: ncclRemoteError),
when this rank was aborted, or after the communicator's timeout (`HIP_FFI_CPU_COLLECTIVE_TIMEOUT`
seconds, default 300, read when the communicator is made: ncclSystemError). Waits poll, sleeping
from 20 µs up to 1 ms, as the cpu platform's interprocess events do (shared_events.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hip_cpu import arena, faults
from hip_ffi._ffi import ffi
from hip_ffi.collective_constants import (
    INVALID_ARGUMENT,
    INVALID_USAGE,
    REMOTE_ERROR,
    SYSTEM_ERROR,
)

MAGIC = b"hipcpuC1"
ID_BYTES = 128
_TOKEN_BYTES = 16
CONTROL_WORDS = 32
CHANNEL_WORDS = 8
STAGING_BYTES = 4 << 20
MAILBOX_BYTES = 256 << 10
TIMEOUT_VARIABLE = "HIP_FFI_CPU_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0  # seconds
LIVENESS_SECONDS = 0.05
_FIRST_SLEEP, _LONGEST_SLEEP = 2e-5, 1e-3  # seconds

# control block words
STATE, PID, START, RANKS, PHASE, SIGNATURE = 0, 1, 2, 3, 4, 8
SIGNATURE_WORDS = 6
JOINED, LEFT, FAILED = 1, 2, 3
_STATES = {LEFT: "destroyed its communicator", FAILED: "failed or was aborted"}
# channel words
SENT, TAKEN, CHUNK_BYTES, MESSAGE_BYTES = 0, 1, 2, 3


class PeerFailure(Exception):
    """A collective or a rendezvous could not complete: `result` is the ncclResult_t."""

    def __init__(self, result: int, message: str) -> None:
        super().__init__(message)
        self.result = result


def new_id() -> bytes:
    """The 128 bytes of a new unique id (a fresh random token in the shared-memory folder)."""
    import tempfile  # (here: loading the platform should not pay for it)

    folder = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    encoded = folder.encode()
    room = ID_BYTES - len(MAGIC) - _TOKEN_BYTES - 1
    if len(encoded) > room:
        raise PeerFailure(SYSTEM_ERROR, f"the folder {folder!r} is longer than {room} bytes")
    raw = MAGIC + os.urandom(_TOKEN_BYTES) + encoded
    return raw.ljust(ID_BYTES, b"\0")


def parse_id(raw: bytes) -> tuple[bytes, str]:
    """(token, file path) of a unique id; PeerFailure(ncclInvalidArgument) for another one."""
    if len(raw) != ID_BYTES or not raw.startswith(MAGIC):
        raise PeerFailure(INVALID_ARGUMENT, "not a unique id of the cpu platform")
    token = raw[len(MAGIC) : len(MAGIC) + _TOKEN_BYTES]
    folder = raw[len(MAGIC) + _TOKEN_BYTES :].split(b"\0", 1)[0].decode(errors="replace")
    return token, str(Path(folder) / f"hip-ffi-nccl-{token.hex()}")


def timeout_seconds() -> float:
    """`HIP_FFI_CPU_COLLECTIVE_TIMEOUT` (seconds > 0), else the default."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        value = float(text) if text else DEFAULT_TIMEOUT
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def _start_time(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks after boot, /proc/<pid>/stat field 22), or
    None when it is gone or a zombie: a pid reused by another process has another."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


class Segment:
    """One rank's view of a communicator's shared file (mapped for as long as it is open)."""

    def __init__(self, raw_id: bytes, ranks: int, rank: int, timeout: float) -> None:
        self.token, self.path = parse_id(raw_id)
        self.ranks, self.rank, self.timeout = ranks, rank, timeout
        self.phase = 0  # this rank's barrier count
        self.sequence = 0  # collectives run so far
        self.moves = 0  # chunks sent or received: a wait that sees it change starts over
        self.aborted = False
        self.pid = os.getpid()
        page = arena.PAGE
        self._channels = _round_up(ranks * CONTROL_WORDS * 8, page)
        self._staging = self._channels + _round_up(ranks * ranks * CHANNEL_WORDS * 8, page)
        self._mailboxes = self._staging + ranks * STAGING_BYTES
        self.size = self._mailboxes + ranks * ranks * MAILBOX_BYTES
        self.address = 0
        self._join()

    # ---- joining and leaving ---------------------------------------------------------
    def _join(self) -> None:
        """Open and map the file (creating or growing it under a lock, never shrinking it, so
        no rank's mapping ever reaches past its end) and claim this rank's control block."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise PeerFailure(SYSTEM_ERROR, f"cannot open {self.path}: {error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size < self.size:
                # Reserve every page now: a page that tmpfs cannot give at first touch would be
                # a SIGBUS (a crash); here it is an error at the rendezvous instead.
                os.posix_fallocate(fd, 0, self.size)
            self.address = arena.map_file(fd, 0, self.size)
            if not self.address:
                raise PeerFailure(SYSTEM_ERROR, f"cannot map {self.size} bytes of {self.path}")
            words = self.control(self.rank)
            if words[STATE]:
                self.close()
                raise PeerFailure(INVALID_USAGE, f"rank {self.rank} joined this unique id twice")
            start = _start_time(self.pid)
            words[PID], words[START], words[RANKS] = self.pid, start or 0, self.ranks
            words[STATE] = JOINED
        except OSError as error:
            raise PeerFailure(
                SYSTEM_ERROR, f"no room for the {self.size} bytes of {self.path}: {error}"
            ) from error
        finally:  # unlock explicitly: the mapping keeps the open file, and so its lock
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def wait_joined(self) -> None:
        """Wait until every rank has joined (ncclInvalidUsage when one counts other ranks);
        then rank 0 unlinks the file, which every rank has open by then."""

        def missing() -> list[int]:
            absent = []
            for other in range(self.ranks):
                words = self.control(other)
                if not words[STATE]:  # (one that joined and left already counts: it came)
                    absent.append(other)
                elif words[RANKS] != self.ranks:
                    raise PeerFailure(
                        INVALID_USAGE,
                        f"rank {other} made a communicator of {words[RANKS]} ranks with this "
                        f"unique id, rank {self.rank} one of {self.ranks}",
                    )
            return absent

        self.wait(missing, "waiting for every rank to join the communicator")
        if self.rank == 0:
            self.forget_file()

    def close(self, state: int = LEFT) -> None:
        """Mark this rank `state` (peers waiting for it stop) and unmap (nothing of this
        process may use the mapping after)."""
        if self.address:
            self.control(self.rank)[STATE] = state
            faults.unmap(self.address, self.size)
            self.address = 0

    def forget_file(self) -> None:
        """Unlink the file (once all joined, or after a failed rendezvous; gone already is
        fine)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    # ---- memory ---------------------------------------------------------------------
    def control(self, rank: int) -> Any:
        return ffi.cast("uint64_t*", self.address + rank * CONTROL_WORDS * 8)

    def channel(self, sender: int, receiver: int) -> Any:
        index = sender * self.ranks + receiver
        return ffi.cast("uint64_t*", self.address + self._channels + index * CHANNEL_WORDS * 8)

    def staging(self, rank: int) -> int:
        return self.address + self._staging + rank * STAGING_BYTES

    def mailbox(self, sender: int, receiver: int) -> int:
        return self.address + self._mailboxes + (sender * self.ranks + receiver) * MAILBOX_BYTES

    # ---- waiting --------------------------------------------------------------------
    def barrier(self, what: str) -> None:
        """Wait until every rank has come this far (each barrier of each rank is counted)."""
        self.phase += 1
        target = self.phase
        self.control(self.rank)[PHASE] = target
        self.wait(lambda: [r for r in range(self.ranks) if self.control(r)[PHASE] < target], what)

    def post_signature(self, signature: Sequence[int]) -> None:
        words = self.control(self.rank)
        for index, value in enumerate(signature):
            words[SIGNATURE + index] = value

    def signatures(self) -> list[tuple[int, ...]]:
        """Every rank's posted signature (read between the two barriers that bracket them)."""
        return [
            tuple(int(self.control(r)[SIGNATURE + i]) for i in range(SIGNATURE_WORDS))
            for r in range(self.ranks)
        ]

    def wait(self, awaited: Callable[[], Sequence[int]], what: str) -> None:
        """Poll until `awaited()` (the ranks still waited for; it may make progress itself)
        is empty; PeerFailure as the module docstring says."""
        deadline = time.monotonic() + self.timeout
        next_look = time.monotonic() + LIVENESS_SECONDS
        delay = _FIRST_SLEEP
        seen: tuple[int, tuple[int, ...]] = (self.moves, ())
        while True:
            pending = awaited()
            if not pending:
                return
            if self.aborted:
                raise PeerFailure(REMOTE_ERROR, "the communicator was aborted")
            for other in pending:
                state = int(self.control(other)[STATE])
                if state in _STATES:
                    raise PeerFailure(REMOTE_ERROR, f"rank {other} {_STATES[state]} {what}")
            now = time.monotonic()
            if now >= next_look:
                self._check_alive(pending, what)
                next_look = now + LIVENESS_SECONDS
            if now >= deadline:
                raise PeerFailure(
                    SYSTEM_ERROR,
                    f"timed out after {self.timeout:g} s {what}: rank(s) "
                    f"{', '.join(map(str, pending))} did not come ({TIMEOUT_VARIABLE} sets it)",
                )
            progress = (self.moves, tuple(pending))
            if progress != seen:  # something moved: look again soon
                delay, seen = _FIRST_SLEEP, progress
                deadline = now + self.timeout
            time.sleep(delay)
            delay = min(2 * delay, _LONGEST_SLEEP)

    def _check_alive(self, ranks: Sequence[int], what: str) -> None:
        for other in ranks:
            words = self.control(other)
            if words[STATE] != JOINED:
                continue  # not there yet: only the timeout can tell
            pid = int(words[PID])
            if pid == self.pid:
                continue  # a rank of this process: it fails or leaves explicitly
            if _start_time(pid) != int(words[START]):
                raise PeerFailure(REMOTE_ERROR, f"rank {other} (process {pid}) exited {what}")
