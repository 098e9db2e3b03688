"""A background tenant in a process of its own, for qos_bench's
foreground rows: a client named "bulk" keeps `depth` copies of `nbytes`
in flight until stopped, and counts the bytes of those that complete.
Its destinations are its own allocations, or allocations another node's
client published (`remote`: their ids and memory, e.g. "b:sys0").

Why a process: two tenants of a node are two processes. As a thread of
the benchmark, the background's client would share the interpreter's
lock with the foreground's loop of small copies, and its CPU time could
not be told from the foreground's."""

import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "pyfixture"))
from busy_copies import keep_copying  # noqa: E402  (tests/pyfixture)


def _run(socket, pythonpath, nbytes, depth, remote, copied, ready, stop, errors):
    sys.path.insert(0, pythonpath)
    try:
        from isometry import Client
        with Client(socket, name="bulk") as c:
            def local():
                return c.register_instance(c.allocate("sys0", nbytes), [nbytes], [("b", 1)], "F,x")

            if remote:
                pairs = [(local(), c.register_instance(dst, [nbytes], [("b", 1)], "F,x",
                                                       memory=memory)) for dst, memory in remote]
            else:
                pairs = [(local(), local()) for _ in range(2)]
            ready.set()

            def count(n):
                with copied.get_lock():
                    copied.value += n

            keep_copying(c, pairs, depth, stop, count)
    except Exception as e:  # reported by end()
        errors.put(repr(e))
        ready.set()


class BulkProcess:
    """The tenant, started; `copied` is the bytes its completed copies
    moved so far; end() stops it and raises what went wrong in it."""

    def __init__(self, socket, pythonpath, nbytes, depth=4, remote=()):
        ctx = multiprocessing.get_context("spawn")  # no gRPC state across a fork
        self._copied = ctx.Value("d", 0.0)
        self._stop = ctx.Event()
        self._errors = ctx.Queue()
        ready = ctx.Event()
        self._process = ctx.Process(target=_run, args=(
            socket, os.path.abspath(pythonpath), nbytes, depth, list(remote), self._copied, ready,
            self._stop, self._errors))
        self._process.start()
        if not ready.wait(60):
            self.end()
            raise RuntimeError("the bulk tenant did not start within 60 s")

    @property
    def pid(self):
        return self._process.pid

    @property
    def copied(self):
        return self._copied.value

    def end(self):
        self._stop.set()
        self._process.join(120)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        if not self._errors.empty():
            raise RuntimeError(f"the bulk tenant failed: {self._errors.get()}")


def rate_during(tenant, during):
    """The tenant's rate over `during()`, in bytes a second."""
    copied0, t0 = tenant.copied, time.perf_counter()
    during()
    return (tenant.copied - copied0) / (time.perf_counter() - t0)
