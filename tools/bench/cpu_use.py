"""Where a machine's CPU time goes while qos_bench times its foreground:
the benchmark's own process (the foreground client), the background's
client process (bulk_process.py) with the daemon's bulk copy threads
(named ch:CHANNEL, docs/operations/tuning.md "Threads: names and
slices"), the daemon's other threads (the ring, DMA, express and gRPC
threads serving the foreground's small copies), and the idle CPUs.

On a machine with few CPUs a closed loop of small copies takes a large
part of them, and a background class that runs on CPU (memcpy) can only
have what is left: CpuWindow measures that, so that the background's
rate can be read against the CPUs the foreground left it as well as the
bytes."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "pyfixture"))
from thread_nice import thread_cpu_s, thread_names  # noqa: E402  (tests/pyfixture)


def usable_cpus():
    """The CPUs this process may run on (the daemons it starts inherit them)."""
    return len(os.sched_getaffinity(0))


def idle_cpu_s():
    """Seconds every CPU of the machine has been idle so far (/proc/stat:
    idle and iowait)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid, bulk=lambda name: False):
    """(CPU seconds of `pid`'s threads for which `bulk(name)`, of its other
    threads) so far."""
    names = thread_names(pid)
    on_bulk = other = 0.0
    for tid, seconds in thread_cpu_s(pid).items():
        if bulk(names.get(tid, "")):
            on_bulk += seconds
        else:
            other += seconds
    return on_bulk, other


def daemon_cpu_s(pid, tenant):
    """(CPU seconds of daemon `pid`'s ch:* threads and of process `tenant`,
    the background's client; of the daemon's other threads) so far."""
    bulk, other = cpu_s(pid, lambda name: name.startswith("ch:"))
    return bulk + sum(cpu_s(tenant)), other


class CpuWindow:
    """CPUs in use, on average, from construction to end(): this process's
    (`bench`), daemon `pid`'s bulk copy threads and the background's client
    process `tenant` (`bulk`), the daemon's other threads (`other`); and
    the machine's CPUs idle (`idle`)."""

    def __init__(self, pid, tenant):
        self.pid, self.tenant = pid, tenant
        self.t0 = time.perf_counter()
        self.bench0 = time.process_time()
        self.bulk0, self.other0 = daemon_cpu_s(pid, tenant)
        self.idle0 = idle_cpu_s()

    def end(self):
        wall = time.perf_counter() - self.t0
        bulk, other = daemon_cpu_s(self.pid, self.tenant)
        self.bench = (time.process_time() - self.bench0) / wall
        self.bulk = (bulk - self.bulk0) / wall
        self.other = (other - self.other0) / wall
        self.idle = (idle_cpu_s() - self.idle0) / wall
        return self
