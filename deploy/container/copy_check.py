"""A Python copy through the daemon of another container (scripts/build-image.sh
--test feeds it to `python3 -` in a client container): a 48 x 64 array of
uint32 in C order copied into Fortran order, every element checked."""
import struct

from isometry import Client

X, Y = 48, 64
N = X * Y
with Client("/run/isometry/grpc.sock", name="image-test") as c:
    src = c.allocate("sys0", 4 * N)
    dst = c.allocate("sys0", 4 * N)
    # y varies fastest in the source: element (i, j) at 4 * (j + Y * i).
    c.write(src, 0, struct.pack(f"<{N}I", *(i * 1000 + j for i in range(X) for j in range(Y))))
    a = c.register_instance(src, [X, Y], [("v", 4)], "F,y,x")
    b = c.register_instance(dst, [X, Y], [("v", 4)], "F,x,y")
    info = c.copy(a, b, wait=True)
    got = struct.unpack(f"<{N}I", c.read(dst, 0, 4 * N))
    # x varies fastest in the destination: element (i, j) at 4 * (i + X * j).
    bad = [(i, j) for i in range(X) for j in range(Y) if got[i + X * j] != i * 1000 + j]
    assert not bad, f"{len(bad)} elements wrong, first {bad[:3]}"
    print(f"python copy from a client container: {info.bytes} bytes C order -> Fortran order, "
          f"all {N} elements right (path: {info.path or 'direct'})")
