"""Collectives: two processes (one device each) average their gradients with an all-reduce,
then one process drives every device of this machine with a communicator of its own.

    python docs/examples/all_reduce.py                            # GPUs: one per process
    HIP_PLATFORM=cpu python docs/examples/all_reduce.py           # the cpu platform
"""

import multiprocessing
import os
import tempfile

import numpy as np

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NCCL's NVLink multicast off (before NCCL loads)

from hip_core import Communicator, Device, hip_api, rendezvous_file


def rank_main(rank: int, size: int, id_file: str, answers: multiprocessing.Queue) -> None:
    # One GPU per process; the cpu platform's processes each use their device 0.
    device = Device(0 if hip_api().platform == "cpu" else rank)
    device.make_current()  # this process's synchronous copies run on its own device
    unique_id = rendezvous_file(id_file, rank)  # rank 0 writes it, the others read it
    with Communicator(device, unique_id, rank, size) as comm:
        grads = np.full(1024, rank + 1, dtype=np.float32)  # this rank's "gradients"
        buffer = device.allocate(grads.nbytes)
        buffer.copy_from(grads)
        stream = device.create_stream()
        comm.all_reduce(buffer, buffer, grads.size, "float32", op="avg", stream=stream)
        stream.sync()  # queued on `stream`: done once the stream gets past it
        buffer.copy_to(grads)
        answers.put((rank, float(grads[0])))


def main() -> None:
    size = 2
    spawn = multiprocessing.get_context("spawn")
    answers = spawn.Queue()
    with tempfile.TemporaryDirectory() as folder:
        id_file = os.path.join(folder, "unique.id")
        ranks = [
            spawn.Process(target=rank_main, args=(r, size, id_file, answers)) for r in range(size)
        ]
        for process in ranks:
            process.start()
        results = dict(sorted(answers.get(timeout=300) for _ in ranks))
        for process in ranks:
            process.join()
    print("average on each rank:", results)  # (1 + 2) / 2 = 1.5 everywhere
    assert results == {0: 1.5, 1: 1.5}

    devices = [Device(i) for i in range(Device.count())]
    if len(devices) > 1:  # one process, several devices: one rank per device
        comms = Communicator.all_for(devices)
        buffers = [d.allocate(4 * 256) for d in devices]
        for device, buffer in zip(devices, buffers, strict=True):
            with device:  # a synchronous copy runs on the current device's null stream
                buffer.copy_from(np.ones(256, np.int32))
        with Communicator.group():  # every rank's call issued together from this thread
            for comm, buffer in zip(comms, buffers, strict=True):
                comm.all_reduce(buffer, buffer, 256, "int32")  # on its device's null stream
        out = np.empty(256, np.int32)
        with devices[-1]:  # a synchronous copy on that device: after its all-reduce
            buffers[-1].copy_to(out)
        print("sum over", len(devices), "devices:", int(out[0]))
        assert (out == len(devices)).all()
        for comm in comms:
            comm.close()


if __name__ == "__main__":
    main()
