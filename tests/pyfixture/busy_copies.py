"""A client that keeps copies in flight on a thread of its own, counting
the bytes of those that complete: the load of the QoS tests and
benchmarks (tests/cluster/test_cluster_qos.py, tools/bench/qos_bench.py).
"""

import threading


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
            inflight, i = [], 0
            while not self.stop.is_set():
                while len(inflight) < depth:
                    src, dst = pairs[i % len(pairs)]
                    i += 1
                    inflight.append((client.copy(src, dst, wait=False), src.total_bytes))
                tid, nbytes = inflight.pop(0)
                client.wait(tid)
                self.copied += nbytes
            for tid, _ in inflight:
                client.wait(tid)
        except Exception as e:  # raised by end()
            self.errors.append(e)

    def end(self):
        """Stops submitting, waits for what is in flight, and raises the
        first error the thread met."""
        self.stop.set()
        self.thread.join(120)
        if self.errors:
            raise self.errors[0]
