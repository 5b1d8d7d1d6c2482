"""Two devices and two processes on one buffer: peer access, a peer copy, then the buffer and
an event handed to another process, which reads and writes the memory in place.

    python docs/examples/share_memory.py                           # any GPU platform
    HIP_FFI_CPU_DEVICES=2 python docs/examples/share_memory.py     # the cpu platform, 2 devices
"""

import multiprocessing

import numpy as np

from hip_core import Device, IpcEventHandle, IpcHandle


def child(handle: IpcHandle, ready: IpcEventHandle, answers: multiprocessing.Queue) -> None:
    shared = handle.open()  # the parent's buffer, mapped into this process: no copy
    event = ready.open()
    event.sync()  # the parent's work on the buffer is done
    values = np.empty(shared.size // 4, dtype=np.float32)
    shared.copy_to(values)
    shared.copy_from(values * 2)  # written into the parent's memory
    shared.close()  # unmaps it here; the parent's buffer stays
    event.close()
    answers.put(float(values.sum()))


def main() -> None:
    x = np.arange(1 << 16, dtype=np.float32)
    first = Device(0)
    buffer = first.allocate(x.nbytes)
    if Device.count() > 1:
        second = Device(1)
        if first.can_access_peer(second):
            first.enable_peer_access(second)  # kernels on device 0 may use device 1's memory
        staging = second.allocate(x.nbytes)
        staging.copy_from(x)
        buffer.copy_from(staging)  # a peer copy, device 1 -> device 0
    else:
        buffer.copy_from(x)
    ready = first.create_event(timing=False, interprocess=True)
    ready.record()  # after the copies queued so far

    spawn = multiprocessing.get_context("spawn")
    answers = spawn.Queue()
    other = spawn.Process(target=child, args=(buffer.ipc_handle(), ready.ipc_handle(), answers))
    other.start()
    total = answers.get(timeout=300)
    other.join()
    # This process must keep `buffer` open until the other is done with it (as here).
    doubled = np.empty_like(x)
    buffer.copy_to(doubled)
    assert total == float(x.sum()) and np.array_equal(doubled, 2 * x)
    print(f"{Device.count()} device(s): the other process read {total:.0f} and doubled the buffer")


if __name__ == "__main__":
    main()
