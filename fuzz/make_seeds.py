#!/usr/bin/python3
"""Writes the seed corpus fuzz/corpus/<target>/ (a handful of small valid
inputs per fuzzer, plus the reported edge cases). Run from the repository
root after a build, with the generated protobuf module on the path:

  PYTHONPATH=build/python /usr/bin/python3 fuzz/make_seeds.py
"""
import os
import struct

from isometry import isometry_pb2 as pb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def box(lo, hi):
    return pb.Box(lo=lo, hi=hi)


def spec(lo, hi, layout, fields=(("a", 4), ("b", 8))):
    return pb.InstanceSpec(allocation=1, offset=64, bounds=box(lo, hi), layout=layout,
                           fields=[pb.Field(name=n, size=s) for n, s in fields])


# ring_entry_fuzzer: raw 64-byte SubmissionEntry (op, flags, priority,
# user_data, src, dst, transfer, reserved[24]).
def entry(op, flags=0, prio=0, src=0, dst=0, transfer=0, reserved=b"\0" * 24):
    return struct.pack("<HHiQQQQ", op, flags, prio, 7, src, dst, transfer) + reserved

write("ring_entry_fuzzer", "nop", entry(0))
write("ring_entry_fuzzer", "copy", entry(1, prio=3, src=1, dst=2))
write("ring_entry_fuzzer", "cancel", entry(2, transfer=5))
write("ring_entry_fuzzer", "bad_flags", entry(1, flags=1, src=1, dst=2))
write("ring_entry_fuzzer", "bad_op", entry(0xffff))

# request_fuzzer: a selector byte, then the serialized request.
def req(sel, msg):
    return bytes([sel]) + msg.SerializeToString()

write("request_fuzzer", "register_2d",
      req(0, pb.RegisterInstanceRequest(spec=spec([0, 0], [8, 6], "x_in=4,F,x_out,y"))))
write("request_fuzzer", "register_offset_lo",
      req(0, pb.RegisterInstanceRequest(spec=spec([-5], [27], "F,x"))))
write("request_fuzzer", "copy_box_via",
      req(1, pb.CopyRequest(src_instance=1, dst_instance=2, box=box([1, 0], [7, 5]),
                            via=[pb.Hop(memory="sys0", layout="y,F,x")])))
write("request_fuzzer", "explain",
      req(2, pb.ExplainPlanRequest(src_memory="sys0", dst_memory="sys0", bounds=box([0, 0, 0], [4, 5, 6]),
                                   fields=[pb.Field(name="v", size=4)], src_layout="F,z,y,x",
                                   dst_layout="z_in=2,F,z_out,y,x")))
# Issue #11's crash: one empty dimension, one spanning all of int64.
write("request_fuzzer", "explain_int64_edges",
      req(2, pb.ExplainPlanRequest(src_memory="sys0", dst_memory="sys0", bounds=box([0, I64_MIN], [0, I64_MAX]),
                                   fields=[pb.Field(name="v", size=4)], src_layout="F,y,x",
                                   dst_layout="F,x,y")))
write("request_fuzzer", "write", req(3, pb.WriteRequest(allocation=1, offset=4090, data=b"0123456789")))
write("request_fuzzer", "read_wrap", req(4, pb.ReadRequest(allocation=1, offset=2**64 - 8, length=16)))
write("request_fuzzer", "local_register",
      req(5, pb.LocalRequest(tag=1, register_instance=pb.RegisterInstanceRequest(
          spec=spec([0], [100], "F,x_in=8,x_out")))))

# local_frame_fuzzer: length-prefixed LocalRequest frames as a client sends.
def frame(msg):
    body = msg.SerializeToString()
    return struct.pack("<I", len(body)) + body

hello = frame(pb.LocalRequest(tag=1, hello=pb.HelloRequest(abi_version=2, client_name="seed")))
register = frame(pb.LocalRequest(tag=2, register_instance=pb.RegisterInstanceRequest(
    spec=spec([0, 0], [16, 3], "F,y,x"))))
write("local_frame_fuzzer", "hello", hello)
write("local_frame_fuzzer", "hello_register", hello + register)
write("local_frame_fuzzer", "allocate", hello + frame(pb.LocalRequest(tag=3, allocate=pb.AllocateRequest(memory="sys0", bytes=4096))))
write("local_frame_fuzzer", "huge_length", struct.pack("<I", 0xffffffff) + b"x")
write("local_frame_fuzzer", "truncated", register[:-3])

# layout_fuzzer: dims byte, 4 x (selector, lo, hi), then the layout text.
def layout(dims, bounds, text):
    head = bytes([dims])
    for d in range(4):
        lo, hi = bounds[d] if d < len(bounds) else (0, 0)
        head += bytes([0x11]) + struct.pack("<qq", lo, hi)  # selector 1: raw values
    return head + text.encode()

write("layout_fuzzer", "aos", layout(2, [(0, 8), (0, 6)], "F,y,x"))
write("layout_fuzzer", "blocked", layout(2, [(0, 8), (-3, 6)], "x_in=4,F,x_out,y"))
write("layout_fuzzer", "blocked_4d", layout(4, [(0, 2)] * 4, "F,x_in=2,y_in=3,z,w,x_out,y_out"))
write("layout_fuzzer", "soa_3d", layout(3, [(1, 4), (0, 5), (2, 3)], "z,y,x,F"))
write("layout_fuzzer", "int64_edges", layout(2, [(0, 0), (I64_MIN, I64_MAX)], "F,y,x"))

# datatype_text_fuzzer: both forms of every constructor (core/datatype_text.h).
for name, text in [
        ("vector_short", "vector(1024,8,16,byte)"),
        ("vector_printed", "vector(4,1,8B; int32)"),
        ("indexed", "indexed([1@0B,2@12B]; resized(-4,16; int32))"),
        ("indexed_short", "hindexed([1,2],[0,12],double)"),
        ("indexed_block", "indexed_block(2,[0,3],int32)"),
        ("struct", "struct([1*int32@0B,2*double@8B])"),
        ("struct_short", "struct([1,2],[0,8],[int32,contiguous(2,char)])"),
        ("subarray", "subarray(F,sizes=[4,6],subsizes=[2,3],starts=[1,0]; double)"),
        ("subarray_short", "subarray([4,6],[2,3],[1,0],c,long_double)"),
        ("darray", "darray(rank 1/6,C,gsizes=[10,7],distribs=[block(4),cyclic],psizes=[3,2]; int32)"),
        ("darray_short", "darray(2,1,[8],[cyclic(2)],[2],fortran,uint16)"),
]:
    write("datatype_text_fuzzer", name, text.encode())

# config_fuzzer: the embedded default, the packaged config, a small cluster.
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "config", "default_config.cc")) as f:
    src = f.read()
start = src.index('R"(', src.index("kDefaultConfig =")) + len('R"(')
write("config_fuzzer", "embedded_default", src[start:src.index(')"', start)].encode())
with open(os.path.join(here, "..", "systemd", "isometryd.toml"), "rb") as f:
    write("config_fuzzer", "systemd", f.read())
write("config_fuzzer", "cluster", b"""[daemon]
grpc_tcp = "127.0.0.1:7470"
[cluster]
node_name = "a"
request_size = "4MiB"
[[cluster.peers]]
name = "b"
address = "127.0.0.1:7471"
""")
write("config_fuzzer", "sizes", b"[runtime]\nspace_threshold = \"1.5GiB\"\n")
