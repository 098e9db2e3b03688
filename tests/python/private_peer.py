#!/usr/bin/python3
"""A second client process for test_python_private: registers a bytearray
of its own as a private range over the local socket and serves commands
on stdin, one a line, answering on stdout.

    private_peer.py GRPC_SOCKET LOCAL_SOCKET NBYTES [--no-publish] [--native]

Prints "range ID" once registered (and published, unless --no-publish).
Commands: "set HEX" (overwrite the buffer in place), "dump" (its bytes
in hex), "close" (end the session, keep the process), "exit".
With --native the session is the C++ client's (isometry._native), whose
published range serves reads from a thread of this process.
Needs the isometry package on PYTHONPATH.
"""

import sys

from isometry import Client


def main(argv):
    grpc_socket, local_socket, nbytes = argv[1], argv[2], int(argv[3])
    publish = "--no-publish" not in argv[4:]
    buf = bytearray(nbytes)
    client = Client(grpc_socket, name="private_peer", local_socket=local_socket,
                    native="--native" in argv[4:])
    rng = client.register_private(buf)
    if publish:
        rng.publish()
    print(f"range {rng.id}", flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "set":
            data = bytes.fromhex(arg)
            buf[: len(data)] = data  # same length: in place, the range stays valid
            print("ok", flush=True)
        elif cmd == "dump":
            print(buf.hex(), flush=True)
        elif cmd == "close":
            client.close()
            print("closed", flush=True)
        elif cmd == "exit":
            break
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
