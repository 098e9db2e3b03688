#!/usr/bin/python3
"""A typed user of the isometry package: one AOS -> SOA copy, and the
exceptions caught by meaning. ``mypy --strict`` checks it with the package
(client/python/tests/test_python_types.py), and the pip test runs it
against a daemon from a venv (test_python_pip.py).

    PYTHONPATH=build-release/python /usr/bin/python3 client/python/examples/typed_example.py \\
        --socket /run/isometry/grpc.sock
"""

import argparse
import struct
from typing import List, Tuple

import isometry

N = 256
FIELDS: List[Tuple[str, int]] = [("id", 4), ("value", 8)]
RECORD = struct.Struct("<id")


def aos_to_soa(c: isometry.Client) -> bool:
    """Copies N records into a struct of arrays; True when every id and
    value landed where the layout says."""
    src = c.allocate("sys0", N * RECORD.size)
    dst = c.allocate("sys0", N * RECORD.size)
    c.write(src, 0, b"".join(RECORD.pack(i, i / 4) for i in range(N)))
    aos = c.register_instance(src, [N], FIELDS, "F,x")
    soa = c.register_instance(dst, [N], FIELDS, "x,F")
    info = c.copy(aos, soa)  # waits; TransferError unless it ends done
    print(f"copied {info.bytes} bytes via {info.path or 'direct'}")
    transfer: int = c.copy(aos, soa, wait=False)
    c.wait(transfer)
    out = c.read(dst, 0, soa.total_bytes)
    ids = struct.unpack_from(f"<{N}i", out, 0)
    values = struct.unpack_from(f"<{N}d", out, 4 * N)
    return list(ids) == list(range(N)) and list(values) == [i / 4 for i in range(N)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", default=isometry.DEFAULT_SOCKET, help="isometryd gRPC socket")
    args = parser.parse_args()
    try:
        with isometry.Client(args.socket, name="typed_example") as c:
            ok = aos_to_soa(c)
            try:
                c.free(1 << 40)  # no such allocation
            except isometry.NotFound as e:
                print(f"caught by meaning: {type(e).__name__} ({e.code})")
            else:
                ok = False
    except isometry.Unavailable as e:
        print(f"no daemon: {e.message}")
        return 2
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
