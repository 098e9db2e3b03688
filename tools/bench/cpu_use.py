"""Where a machine's CPU time goes while qos_bench times its foreground:
the benchmark's own process (the foreground client, and the background
client's thread), the daemon's bulk copy threads (named ch:CHANNEL,
docs/operations/tuning.md "Threads: names and slices"), and the daemon's
other threads (the ring, DMA, express and gRPC threads serving the
foreground's small copies).

On a machine with few CPUs a closed loop of small copies takes a large
part of them, and a background class that runs on CPU (memcpy) can only
have what is left: CpuWindow measures that, so that the background's
rate can be read against the CPUs the foreground left it as well as the
bytes."""

import os
import time


def usable_cpus():
    """The CPUs this process may run on (the daemons it starts inherit them)."""
    return len(os.sched_getaffinity(0))


def daemon_cpu_s(pid):
    """(CPU seconds of `pid`'s ch:* threads, of its other threads) so far,
    from /proc (schedstat: nanoseconds on a CPU)."""
    bulk = other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                seconds = int(f.read().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):  # the thread ended
            continue
        if name.startswith("ch:"):
            bulk += seconds
        else:
            other += seconds
    return bulk, other


class CpuWindow:
    """CPUs in use, on average, from construction to end(): this process's
    (`bench`), daemon `pid`'s bulk copy threads (`bulk`) and its other
    threads (`other`)."""

    def __init__(self, pid):
        self.pid = pid
        self.t0 = time.perf_counter()
        self.bench0 = time.process_time()
        self.bulk0, self.other0 = daemon_cpu_s(pid)

    def end(self):
        wall = time.perf_counter() - self.t0
        bulk, other = daemon_cpu_s(self.pid)
        self.bench = (time.process_time() - self.bench0) / wall
        self.bulk = (bulk - self.bulk0) / wall
        self.other = (other - self.other0) / wall
        return self
