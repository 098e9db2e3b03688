"""The machine a benchmark ran on, recorded with every row (the Python
benchmarks' counterpart of tools/bench/machine.h, with the same keys):
figures from two VMs differ by more than any change we make, so a row that
does not say where it was measured cannot be compared with another."""

import ctypes
import os
import threading
import time

SIZE = 64 << 20


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _timed(copies):
    """Seconds for `copies` (dst, src, n) run together, one thread each;
    ctypes.memmove lets go of the GIL, so two run at once."""
    ready = threading.Barrier(len(copies) + 1)
    threads = [threading.Thread(target=lambda c=c: (ready.wait(), ctypes.memmove(*c)))
               for c in copies]
    for t in threads:
        t.start()
    time.sleep(0.002)  # the threads reach the barrier; their start is not timed
    t0 = time.perf_counter()
    ready.wait()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def measure():
    """{"cpu", "cpus", "kernel", "memcpy_gbps_1", "memcpy_gbps_2"}: best of
    five 64 MiB copies with one thread and with two (halves)."""
    src = (ctypes.c_char * SIZE).from_buffer(bytearray(b"\1") * SIZE)
    dst = (ctypes.c_char * SIZE).from_buffer(bytearray(b"\2") * SIZE)
    a, b = ctypes.addressof(dst), ctypes.addressof(src)
    half = SIZE // 2
    one = min(_timed([(a, b, SIZE)]) for _ in range(5))
    two = min(_timed([(a, b, half), (a + half, b + half, SIZE - half)]) for _ in range(5))
    return {"cpu": _cpu_model(), "cpus": os.cpu_count() or 0, "kernel": os.uname().release,
            "memcpy_gbps_1": round(SIZE / one / 1e9, 3),
            "memcpy_gbps_2": round(SIZE / two / 1e9, 3)}


def line(m):
    """The table's head line, as isometry_bench prints it."""
    return (f"machine: {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}, memcpy "
            f"{m['memcpy_gbps_1']:.3g} GB/s one thread, {m['memcpy_gbps_2']:.3g} GB/s two")


if __name__ == "__main__":
    print(line(measure()))
