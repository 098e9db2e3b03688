"""TCP ports for the daemons a test starts (cluster nodes, gRPC and
metrics listeners): one helper for every Python test, so that no two
ports handed out in one process are ever the same."""

import random
import socket

_handed_out = set()  # the ports free_port() gave this process


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port(host="127.0.0.1"):
    """A TCP port free on `host` now and never handed out before by this
    process: two binds to port 0 in a row can get the same port, and a
    cluster whose nodes share one has a node dial itself as its peer (a CI
    run saw "node 'a' is not a [[peer]] of node 'a'"). Drawn below the
    kernel's ephemeral range where there is room, so no outgoing
    connection's source port takes it before the daemon binds it."""
    low = _ephemeral_low()
    for _ in range(1000):
        want = random.randint(10000, low - 1) if low > 10001 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, want))
            except OSError:
                continue
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free TCP port on {host}")
