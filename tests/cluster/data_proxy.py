"""A TCP proxy a test puts on a node's data path (the node's welcomes send
its peers' data connections there: ISOMETRY_FAULT_DATA_ADDRESS), for the
tests that change or cut what passes (test_cluster_replay,
test_cluster_resume)."""

import re
import socket
import threading
import time


def shut_down(sockets):
    """Shuts both ways of each socket, so that a thread blocked on it wakes."""
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class DataPathProxy:
    """Forwards each connection to the node's data port (`target`, known
    once the node logged it: see wait_for_target). pump() passes bytes on
    as they come; a subclass may read and change frames instead. hold()
    cuts every connection through it and holds new ones unanswered (an
    outage on the path); release() forwards again."""

    def __init__(self):
        self.target = None
        # Set with `target`: a connection may arrive first (the other node
        # learns the proxy's address from its peer before the test reads
        # the node's log).
        self.target_known = threading.Event()
        self.mu = threading.Lock()
        self.open, self.held, self.holding = [], [], False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def wait_for_target(self, node, timeout=10):
        """Reads `node`'s data address from its log; True once known."""
        deadline = time.time() + timeout
        while not self.target and time.time() < deadline:
            m = re.search(r"data plane listening on (\S+) ", node.log_text())
            self.target = m.group(1) if m else None
            time.sleep(0.05)
        if self.target:
            self.target_known.set()
        return bool(self.target)

    def accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            with self.mu:
                if self.holding:
                    self.held.append(down)
                    continue
            if not self.target_known.wait(20):
                down.close()
                continue
            host, port = self.target.rsplit(":", 1)
            try:
                up = socket.create_connection((host, int(port)), timeout=5)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            with self.mu:
                self.open += [down, up]
            for src, dst, outgoing in ((down, up, True), (up, down, False)):
                threading.Thread(target=self.pump_and_close, args=(src, dst, outgoing),
                                 daemon=True).start()

    def pump_and_close(self, src, dst, outgoing):
        try:
            self.pump(src, dst, outgoing)
        except (OSError, ConnectionError):
            pass
        finally:
            shut_down((src, dst))
            src.close()

    def pump(self, src, dst, outgoing):
        """Passes src's bytes to dst until src closes (`outgoing`: from the
        connecting node towards the target)."""
        while True:
            got = src.recv(1 << 20)
            if not got:
                return
            dst.sendall(got)

    def hold(self):
        with self.mu:
            self.holding = True
            cut, self.open = self.open, []
        shut_down(cut)

    def release(self):
        with self.mu:
            self.holding = False
            held, self.held = self.held, []
        for s in held:  # the attempts made in the dark fail and are retried
            s.close()

    def close(self):
        self.listener.close()
        self.release()
