"""The DaemonSet's readiness and liveness probe: grpc.health.v1.Health/Check
for the server as a whole (service "") on the daemon's unix socket.

    python3 health-check.py [SOCKET]      # default /run/isometry/grpc.sock

Exits 0 when the answer is SERVING, 1 otherwise. Over the unix socket because
Kubernetes' own grpc probe dials the TCP port without TLS, which the peer
port refuses under [cluster.tls]. The message is built by hand (an empty
request; the answer SERVING is field 1 = 1, bytes 08 01): python3-grpcio has
no health stubs, and the probe should not need more than it.
"""
import sys

import grpc

SERVING = b"\x08\x01"
socket = sys.argv[1] if len(sys.argv) > 1 else "/run/isometry/grpc.sock"
with grpc.insecure_channel("unix:" + socket) as channel:
    try:
        answer = channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=4)
    except grpc.RpcError as e:
        print(f"health-check: {e.code().name}: {e.details()}")
        sys.exit(1)
print("health-check: SERVING" if answer == SERVING else f"health-check: not serving ({answer.hex()})")
sys.exit(0 if answer == SERVING else 1)
