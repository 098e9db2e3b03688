"""A copy into a file of the daemon's DSK memory and back, from another
container (scripts/build-image.sh --test feeds it to `python3 -`): the
disk_write and disk_read channels run io_uring, which the daemon's seccomp
profile (deploy/container/isometryd-seccomp.json) must allow. 8 MiB of
uint32 written to dsk0's file "check.bin" in Fortran order from a C-order
allocation, read back into another allocation in C order, every element
checked."""
import struct

from isometry import Client

X, Y = 1024, 2048
N = X * Y
with Client("/run/isometry/grpc.sock", name="image-disk-test") as c:
    src = c.allocate("sys0", 4 * N)
    back = c.allocate("sys0", 4 * N)
    c.write(src, 0, struct.pack(f"<{N}I", *range(N)))
    mem = c.register_instance(src, [X, Y], [("v", 4)], "F,y,x")
    out = c.register_instance(back, [X, Y], [("v", 4)], "F,y,x")
    disk = c.register_instance(bounds=[X, Y], fields=[("v", 4)], layout="F,x,y",
                               memory="dsk0", file="check.bin")
    wrote = c.copy(mem, disk, wait=True)
    read = c.copy(disk, out, wait=True)
    got = struct.unpack(f"<{N}I", c.read(back, 0, 4 * N))
    bad = [i for i in range(N) if got[i] != i]
    assert not bad, f"{len(bad)} elements wrong after the file round trip, first at {bad[:3]}"
    print(f"file round trip through dsk0 from a client container: {wrote.bytes} bytes written "
          f"(path: {wrote.path}), read back (path: {read.path}), all {N} elements right")
