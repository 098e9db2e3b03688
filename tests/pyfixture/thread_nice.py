"""Nice values of a daemon's threads, for the tests of qos.class.nice
(docs/guides/qos.md, "CPU time")."""

import os
import threading


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


def thread_nice_values(pid):
    """{tid: nice value} of process `pid`'s threads (/proc, stat field 19)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended
            continue
        out[int(tid)] = int(fields[16])  # fields[0] is field 3, the state
    return out
