"""A client that keeps copies in flight on a thread of its own, counting
the bytes of those that complete: the load of the QoS tests and
benchmarks (tests/python/test_qos.py, tests/cluster/test_cluster_qos.py,
tools/bench/qos_bench.py and its tenant process, bulk_process.py).
"""

import threading


def keep_copying(client, pairs, depth, stop, done=lambda nbytes: None):
    """Copies over `pairs` (source, destination instances) in a loop,
    `depth` in flight, until `stop` (an Event) is set, calling
    `done(bytes)` as each completes; then waits for those in flight."""
    inflight, i = [], 0
    while not stop.is_set():
        while len(inflight) < depth:
            src, dst = pairs[i % len(pairs)]
            i += 1
            inflight.append((client.copy(src, dst, wait=False), src.total_bytes))
        tid, nbytes = inflight.pop(0)
        client.wait(tid)
        done(nbytes)
    for tid, _ in inflight:
        client.wait(tid)


class Busy:
    """Copies over `pairs` (source, destination instances) in a loop,
    `depth` in flight, until end(); `copied` is the bytes of the copies
    completed so far."""

    def __init__(self, client, pairs, depth=3):
        self.stop = threading.Event()
        self.copied = 0
        self.errors = []
        self.thread = threading.Thread(target=self.run, args=(client, pairs, depth))
        self.thread.start()

    def run(self, client, pairs, depth):
        try:
            keep_copying(client, pairs, depth, self.stop, self.count)
        except Exception as e:  # raised by end()
            self.errors.append(e)

    def count(self, nbytes):
        self.copied += nbytes

    def end(self):
        """Stops submitting, waits for what is in flight, and raises the
        first error the thread met."""
        self.stop.set()
        self.thread.join(120)
        if self.errors:
            raise self.errors[0]
