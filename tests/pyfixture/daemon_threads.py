"""Counting a daemon's threads in tests that check a load or an attack
left none behind."""

import os

# gRPC's executors (threads named "default-executor" and
# "resolver-executor", cut to 15 characters in /proc) start a thread each
# time their queue backs up, up to twice the CPUs, and keep it: how many a
# daemon has after a load varies from run to run, and none of them belongs
# to a connection or a copy.
GRPC_EXECUTORS = ("default-executo", "resolver-execut")


def _thread_names(pid):
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass  # the thread ended meanwhile
    return names


def tasks_of(pid):
    """The threads of process `pid` other than gRPC's executors'."""
    return sum(name not in GRPC_EXECUTORS for name in _thread_names(pid))


def grpc_executor_threads(pid):
    """How many threads gRPC's executors run in process `pid` (bounded by
    gRPC: at most twice the CPUs each)."""
    return sum(name in GRPC_EXECUTORS for name in _thread_names(pid))
