#!/usr/bin/python3
"""Array of structs -> struct of arrays through isometryd (run with /usr/bin/python3).

    PYTHONPATH=build-release/python /usr/bin/python3 client/python/examples/copy_example.py \\
        --socket /run/isometry/grpc.sock
"""
import argparse
import struct

from isometry import Client

N = 1000
FIELDS = [("id", 4), ("mass", 8), ("flag", 1)]  # one record: struct "<idB", 13 bytes
ENTRY = struct.Struct("<idB")

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--socket", default="/run/isometry/grpc.sock", help="isometryd gRPC socket")
args = parser.parse_args()

records = [(i, i * 0.5, i % 251) for i in range(N)]
with Client(args.socket, name="copy_example") as c:
    src = c.allocate("sys0", N * ENTRY.size)
    dst = c.allocate("sys0", N * ENTRY.size)
    c.write(src, 0, b"".join(ENTRY.pack(*r) for r in records))
    aos = c.register_instance(src, [N], FIELDS, "F,x")  # fields of a point together
    soa = c.register_instance(dst, [N], FIELDS, "x,F")  # one array per field
    info = c.copy(aos, soa, wait=True)
    out = c.read(dst, 0, soa.total_bytes)
    ids = struct.unpack_from(f"<{N}i", out, 0)
    mass = struct.unpack_from(f"<{N}d", out, 4 * N)
    flag = struct.unpack_from(f"<{N}B", out, 12 * N)
    ok = list(zip(ids, mass, flag)) == records
    print(f"{'OK' if ok else 'MISMATCH'}: {N} records AOS->SOA, {info.bytes} bytes "
          f"via {info.path or 'direct'} in {info.elapsed_s * 1e3:.2f} ms "
          f"({info.measured_bytes_per_s / 1e9:.2f} GB/s; "
          f"predicted {info.predicted_bytes_per_s / 1e9:.2f})")
raise SystemExit(0 if ok else 1)
