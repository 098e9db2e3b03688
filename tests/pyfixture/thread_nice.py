"""Nice values, names, scheduler slices, context switches and CPU time of
a daemon's threads, for the tests of qos.class.nice (docs/guides/qos.md,
"CPU time"), of the short slice the threads a small copy waits on run
with and of the gRPC threads a waited copy wakes, and for qos_bench's
account of where the CPUs went (tools/bench/cpu_use.py)."""

import ctypes
import os
import struct
import threading

SYS_SCHED_SETATTR, SYS_SCHED_GETATTR = 314, 315  # x86-64
# struct sched_attr: size, policy, flags, nice, priority, runtime,
# deadline, period, util_min, util_max.
SCHED_ATTR = "IIQiIQQQII"
SHORT_SLICE_NS = 100_000  # core/thread_slice.h, kShortSlice
_libc = ctypes.CDLL(None, use_errno=True)


def may_lower_nice():
    """Whether a thread of this process may raise its nice value and lower
    it back: what the daemon probes at start (core/thread_nice.h)."""
    ok = []

    def probe():
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, 1)
            os.setpriority(os.PRIO_PROCESS, tid, 0)
            ok.append(True)
        except PermissionError:
            pass

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(ok)


def per_thread(pid, name):
    """{tid: text of /proc/PID/task/TID/`name`} of process `pid`'s threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                out[int(tid)] = f.read()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended
            continue
    return out


def thread_nice_values(pid):
    """{tid: nice value} of process `pid`'s threads (/proc, stat field 19)."""
    # After the name's closing parenthesis, fields[0] is field 3, the state.
    return {tid: int(stat.rsplit(")", 1)[1].split()[16])
            for tid, stat in per_thread(pid, "stat").items()}


SCHED_OTHER, SCHED_IDLE = 0, 5


def thread_policies(pid):
    """{tid: scheduling policy} of process `pid`'s threads (/proc, stat
    field 41: SCHED_OTHER 0, SCHED_IDLE 5)."""
    return {tid: int(stat.rsplit(")", 1)[1].split()[38])
            for tid, stat in per_thread(pid, "stat").items()}


def thread_names(pid):
    """{tid: name} of process `pid`'s threads."""
    return {tid: comm.strip() for tid, comm in per_thread(pid, "comm").items()}


def thread_switches(pid):
    """{tid: context switches so far, voluntary and not} of process `pid`'s
    threads (/proc, status)."""
    out = {}
    for tid, status in per_thread(pid, "status").items():
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out[tid] = int(fields["voluntary_ctxt_switches"]) + int(
            fields["nonvoluntary_ctxt_switches"])
    return out


def thread_cpu_s(pid):
    """{tid: seconds on a CPU so far} of process `pid`'s threads (/proc,
    schedstat: nanoseconds)."""
    return {tid: int(stat.split()[0]) / 1e9 for tid, stat in per_thread(pid, "schedstat").items()}


def sched_runtime(tid):
    """Thread `tid`'s sched_runtime (sched_getattr): its slice in ns where
    the kernel has custom slices (Linux 6.12+), 0 on older kernels."""
    buf = ctypes.create_string_buffer(struct.calcsize(SCHED_ATTR))
    if _libc.syscall(SYS_SCHED_GETATTR, tid, buf, len(buf), 0) != 0:
        raise OSError(ctypes.get_errno(), f"sched_getattr of thread {tid}")
    return struct.unpack(SCHED_ATTR, buf.raw)[5]


def short_slice_supported():
    """Whether the kernel honours a custom slice: set one on a scratch
    thread and read it back, as the daemon probes (core/thread_slice.h)."""
    got = []

    def probe():
        attr = struct.pack(SCHED_ATTR, struct.calcsize(SCHED_ATTR), 0, 0,
                           os.getpriority(os.PRIO_PROCESS, 0), 0, SHORT_SLICE_NS, 0, 0, 0, 0)
        buf = ctypes.create_string_buffer(attr)
        if _libc.syscall(SYS_SCHED_SETATTR, 0, buf, 0) == 0:
            got.append(sched_runtime(threading.get_native_id()))

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got == [SHORT_SLICE_NS]
