"""A CMA copy from a client container (scripts/build-image.sh --test feeds it
to `python3 -` after starting the daemon as deploy/kubernetes/overlays/cma
does): 4096 uint32 of this process's own memory copied into a pool
allocation by the daemon's process_vm_readv, every value checked."""
import struct

from isometry import Client

N = 4096
mine = bytearray(struct.pack(f"<{N}I", *(7 * i + 3 for i in range(N))))
with Client("/run/isometry/grpc.sock", name="image-cma-test",
            local_socket="/run/isometry/isometry.sock") as c:
    private = c.register_private(mine)
    src = c.register_instance(private_range=private, bounds=[N], fields=[("v", 4)], layout="F,x")
    dst = c.allocate("sys0", 4 * N)
    out = c.register_instance(dst, [N], [("v", 4)], "F,x")
    info = c.copy(src, out, wait=True)
    got = struct.unpack(f"<{N}I", c.read(dst, 0, 4 * N))
    assert got == tuple(7 * i + 3 for i in range(N)), "wrong values"
    assert "cma" in (info.path or ""), f"not through the cma channel: {info.path}"
    print(f"CMA copy from a client container: {info.bytes} bytes of its own memory "
          f"(path: {info.path}), all {N} values right")
