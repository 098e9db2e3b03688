#!/usr/bin/python3
"""Fails when a source file includes a header from a layer it may not use.

Lower layers never include higher ones (docs/development/style.md,
"Dependency direction"),
and protobuf/gRPC types stay in the services, the peer service, the clients
and the tools. The rule is a table below; a new folder must be added to it
before its files pass. Reads the `#include "..."` lines of every tracked .cc
and .h file, plus `#include <...>` lines that name gRPC or protobuf headers.
It also fails on a channel kind's value named outside channels/ (see
check_kind_use).

Usage: scripts/check_layering.py [REPO_ROOT]
Prints FILE:LINE: layer X may not include Y for each violation; exits 1 on
any, 0 when the tree is clean.
"""

import os
import re
import subprocess
import sys

# Where each file belongs: the first matching path prefix wins, so deeper
# folders come before their parents. "channels/<kind>/" is matched by rule
# (see layer_of) so a new channel folder needs no edit here.
LAYER_PREFIXES = [
    ("core/", "core"),
    ("layout/", "layout"),
    ("config/", "config"),
    ("planner/", "planner"),
    ("redistribution/", "redistribution"),
    ("active/", "active"),
    # Another process's memory by CMA (the engine under the cma channel and
    # the client's direct reads).
    ("procmem/", "procmem"),
    # The peer data plane: links with peer daemons, their hello, resume,
    # checksums, TLS, and the RDMA transport (net/rdma/). Below the
    # channels: the network channel is an adapter over it.
    ("net/", "net"),
    ("channels/", "channels"),
    # Our framing of the local socket and the shared ring's ABI; built on
    # protobuf, so only the layers that may see proto types include it.
    ("proto/", "wire"),
    ("daemon/runtime/", "daemon/runtime"),
    ("daemon/node/", "daemon/node"),
    ("daemon/server/", "daemon/server"),
    ("daemon/cluster/", "daemon/cluster"),
    # main.cc and the start checks assemble the servers.
    ("daemon/", "daemon"),
    ("client/", "client"),
    ("tools/", "tools"),
    ("examples/", "examples"),
    ("fuzz/", "fuzz"),
    ("tests/", "tests"),
    # tests/ is on the test targets' include path: "unit/test_util.h".
    ("unit/", "tests"),
    ("integration/", "tests"),
]

# Generated code (isometry.pb.h, isometry.grpc.pb.h) and the protobuf and
# gRPC libraries' own headers.
PROTO = "proto"
PROTO_ANGLE = re.compile(r"^(grpcpp|grpc|google/protobuf)/")

_DOMAIN = {"core", "layout", "config", "planner", "channels", "procmem"}
_DAEMON_LOW = _DOMAIN | {"daemon/runtime", "daemon/node", "redistribution", "active"}
_PROTO_USERS = {"wire", PROTO}

# Which layers each layer may include (itself always included).
ALLOWED = {
    "core": {"core"},
    "layout": {"core"},
    "config": {"core", "layout"},
    # Pure: request + topology in, plan out; no config, no I/O.
    "planner": {"core", "layout"},
    # Pure too: distributions and their intersections (issue #18).
    "redistribution": {"core"},
    # Active Access (issue #19): region tables and the access log ring.
    "active": {"core"},
    "procmem": {"core", "layout"},
    # Its job is a chunk of a cross-node copy (net/chunk.h), not a channel
    # request: it never includes channels/ (config/: the RDMA probe's
    # settings).
    "net": {"core", "layout", "config"},
    "channels": {"core", "layout", "config", "procmem", "net"},
    "wire": {"core", PROTO},
    "daemon/runtime": _DOMAIN,
    # net/: the RDMA probe, whose answer the node logs and reports.
    "daemon/node": _DOMAIN | {"daemon/runtime", "redistribution", "active", "net"},
    "daemon/server": _DAEMON_LOW | _PROTO_USERS,
    # The peer service converts with daemon/server/convert.h; the cluster
    # layer drives the data plane (net/).
    "daemon/cluster": _DAEMON_LOW | _PROTO_USERS | {"daemon/server", "net"},
    # The start checks open the data plane's TLS context and RDMA probe.
    "daemon": _DAEMON_LOW | _PROTO_USERS | {"daemon/server", "daemon/cluster", "net"},
    # Clients speak the wire and the core model, never the daemon's insides.
    # active/: the access log ring's ABI and reader.
    # procmem/: direct reads of a peer's memory (client/cpp/direct_read.h).
    "client": {"core", "layout", "active", "procmem"} | _PROTO_USERS,
    "tools": _DAEMON_LOW | _PROTO_USERS
    | {"daemon/server", "daemon/cluster", "daemon", "client", "redistribution"},
    # What a user of the project writes: the client, or the runtime embedded
    # in-process with its config (examples/local_copy.cc).
    "examples": {"core", "layout", "config", "daemon/runtime", "client"},
    # Fuzzers reach into the parsers and converters they attack.
    "fuzz": _DAEMON_LOW | _PROTO_USERS | {"daemon/server", "daemon/cluster", "client"},
    # Tests may include anything except the other leaves (examples, fuzz).
    "tests": _DAEMON_LOW | _PROTO_USERS
    | {"daemon/server", "daemon/cluster", "daemon", "client", "tools", "redistribution", "net"},
}

# The daemon asks a channel kind through channels/channel_factory.h and the
# descriptors (channels/channel_backend.h), never through a kind's own
# header: a new kind then touches its folder and the factory's table only
# (docs/development/adding-a-channel.md). The daemon's layers may include
# from a channel folder only these pieces of the data paths it drives (a
# client's process, a disk file, the routes of network hops over RDMA); no
# <kind>_channel.h and no descriptor header is among them. The peer data
# plane itself is net/, not a channel.
_DAEMON_LAYERS = {"daemon/runtime", "daemon/node", "daemon/server", "daemon/cluster", "daemon"}
DAEMON_CHANNEL_HEADERS = {
    "channels/cma/client_process.h",
    "channels/cma/own_hops.h",
    "channels/disk/disk_file.h",
    "channels/rdma/net_routes.h",
}

# Libraries every layer may use, like the standard library: abseil (the
# error type, strings, and the annotated locks clang checks).
BASE_LIBRARIES = re.compile(r"^absl/")

_QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
_ANGLE = re.compile(r"^\s*#\s*include\s+<([^>]+)>")


def layer_of(path):
    if path.endswith(".pb.h"):
        return PROTO
    for prefix, layer in LAYER_PREFIXES:
        if path.startswith(prefix):
            return layer
    return None


def channel_kind(path):
    """'disk' for channels/disk/x.h; None for channels/x.h and other layers."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "channels":
        return parts[1]
    return None


# The peer protocol (proto/isometry_peer.proto) is the daemons' own: only the
# cluster layer speaks it, and the tests that attack it. Clients, tools and
# the client service see the client API alone.
PEER_PROTO = re.compile(r"^isometry_peer\.(grpc\.)?pb\.h$")
PEER_PROTO_USERS = {"daemon/cluster", "tests"}


# A source file is compiled in its own target, never included: CMake's
# unity batches do that on their own, and scripts/tidy.sh turns off
# clang-tidy's bugprone-suspicious-include (which flags exactly this) because
# those batches include .cc files; this rule keeps the check for our code.
_SOURCE_FILE = re.compile(r"\.(c|cc|cpp|cxx)$")


def check_include(src, inc):
    """Returns why `src` may not include `inc`, or None when it may."""
    if _SOURCE_FILE.search(inc):
        return f"{src} includes the source file {inc} (include its header)"
    src_layer = layer_of(src)
    if BASE_LIBRARIES.match(inc):
        return None
    inc_layer = PROTO if PROTO_ANGLE.match(inc) else layer_of(inc)
    if src_layer is None:
        return f"{src} is in no layer (add its folder to scripts/check_layering.py)"
    if inc_layer is None:
        return (f"layer {src_layer} may not include {inc} "
                "(in no layer: add its folder to scripts/check_layering.py)")
    if inc_layer != src_layer and inc_layer not in ALLOWED[src_layer]:
        return f"layer {src_layer} may not include {inc} (layer {inc_layer})"
    if PEER_PROTO.match(inc) and src_layer not in PEER_PROTO_USERS:
        return (f"layer {src_layer} may not include {inc} (the peer protocol is "
                "daemon/cluster's alone)")
    if (src_layer in _DAEMON_LAYERS and channel_kind(inc)
            and inc not in DAEMON_CHANNEL_HEADERS):
        return (f"layer {src_layer} may not include {inc} (ask the kind through "
                "channels/channel_factory.h)")
    # A channel folder stands alone: it uses the channel contract and the
    # shared helpers in channels/, never another channel's files.
    src_kind, inc_kind = channel_kind(src), channel_kind(inc)
    if src_kind and inc_kind and src_kind != inc_kind:
        return f"layer channels/{src_kind} may not include {inc} (channel {inc_kind})"
    return None


def tracked_sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "*.cc", "*.h"],
                             check=True, capture_output=True, text=True).stdout
        return [p for p in out.splitlines() if p]
    except (OSError, subprocess.CalledProcessError):
        # A source tarball: every .cc/.h outside build folders.
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames
                           if not d.startswith((".", "build"))]
            for name in filenames:
                if name.endswith((".cc", ".h")):
                    found.append(os.path.normpath(os.path.join(rel, name)))
        return sorted(found)


# Channels own their kind (docs/development/adding-a-channel.md): outside
# channels/ no code names a kind's value (no switch, no test on a kind), so a
# new kind touches its folder and the factory's table alone. Allowed: the
# vocabulary itself (core/channel_kind.*), a struct field's default, and
# the leaves that build channels of a kind on purpose (tests, benchmarks,
# fuzzers, the planner tests' synthetic graphs).
_KIND_VALUE = re.compile(r"\bChannelKind::k\w+")
_KIND_FIELD_DEFAULT = re.compile(r"^\s*ChannelKind \w+ = ChannelKind::k\w+;")
_KIND_USERS = ("channels/", "core/channel_kind.", "tests/", "tools/", "fuzz/",
               "planner/testing/")


def check_kind_use(src, line):
    """Returns why `line` of `src` may not name a channel kind, or None."""
    if src.startswith(_KIND_USERS) or not _KIND_VALUE.search(line):
        return None
    if _KIND_FIELD_DEFAULT.match(line):
        return None
    return (f"{src} names a channel kind's value outside channels/ "
            "(ask the kind's descriptor: channels/channel_backend.h)")


def violations(root):
    for path in tracked_sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                why = check_kind_use(path, line)
                if why:
                    yield f"{path}:{lineno}: {why}"
                m = _QUOTED.match(line)
                inc = m.group(1) if m else None
                if inc is None:
                    m = _ANGLE.match(line)
                    if not m or not PROTO_ANGLE.match(m.group(1)):
                        continue
                    inc = m.group(1)
                why = check_include(path, inc)
                if why:
                    yield f"{path}:{lineno}: {why}"


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = list(violations(os.path.abspath(root)))
    for v in found:
        print(v)
    if found:
        print(f"check_layering: {len(found)} line(s) break the layering "
              "(rules in scripts/check_layering.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
