// The embedded default configuration: one node, host memories. Kept apart
// from the parser so the text a user reads with --print-default-config is
// one file to review.
#include "config/config_parser.h"

namespace isometry {
namespace {

constexpr std::string_view kDefaultConfig =
    R"(# Isometry node configuration (embedded default: one node, host memories).

[daemon]
local_socket = "/run/isometry/isometry.sock"   # shared-memory handshake (SO_PEERCRED)
grpc_socket = "/run/isometry/grpc.sock"        # gRPC for every language
# grpc_tcp = "127.0.0.1:7470"                  # also listen on TCP (off by default)
# socket_group = "isometry"                    # group allowed to connect
socket_mode = "0660"
log_level = "info"
state_dir = "/var/lib/isometry"
sq_entries = 256
cq_entries = 256
shutdown_grace_ms = 5000
max_sessions = 1024
max_sessions_per_uid = 512        # local-socket sessions of one uid (a job's ranks on this node)
max_grpc_sessions = 256           # gRPC sessions together (gRPC hides the peer uid)
max_connections_per_uid = 512     # local-socket connections of one uid
hello_timeout_ms = 5000           # a local connection says hello by then or is closed
max_pending_hellos_per_uid = 64   # local connections of one uid not yet past hello
max_connection_threads = 1024     # threads serving local connections (one each; see TasksMax)
max_transfers_per_session = 1024  # copies in flight per session
max_attach_backlog_bytes = "1MiB" # completion events a gRPC client has not read yet
max_allocations_per_session = 1024
max_instances_per_session = 16384
max_private_ranges_per_session = 64   # registered ranges of a client's own memory (CMA)
own_hop_window_mib = 16               # a client's hop window: it runs hops touching its own memory (0: off)
own_hop_timeout_ms = 10000            # a copy whose client does not run its hop by then fails
direct_reads = true                   # clients may read a peer's published private range themselves
                                      # (no daemon thread between; skips queues and priorities)
ring_poll_us = 50                     # the ring thread polls this long after work before sleeping
# cpu_latency_us = 0                  # hold a CPU wake-up latency request (/dev/cpu_dma_latency, root's):
                                      # faster hand-offs between threads for small copies, more power
max_datatypes_per_session = 1024      # RegisterDatatype handles
translate_threads = 2                 # threads translating datatypes for gRPC calls
translate_queue = 32                  # such calls waiting, all callers (RESOURCE_EXHAUSTED past it)
max_translates_per_session = 2        # queued or running per session (session-less: all together)
max_translate_weight = 1048576        # a request's datatype nodes and entries (at most 1048576)
max_watched_regions_per_session = 64  # Active Access: watched regions of one session
max_priority = 100                    # the highest copy priority a client may ask for
# priority_ceilings = { "1000" = 1000 }  # per uid, instead of max_priority
max_watched_allocations_per_session = 16  # watched allocations of one session (a thread each)
max_watch_threads = 256              # watched allocations on the node in all
max_watch_scratch_bytes_per_session = "256MiB"  # puts into watched memory waiting to be applied
max_watch_scratch_bytes = "1GiB"     # the same, all sessions together
max_datatype_bytes_per_session = "64MiB"  # memory of one session's registered datatypes
max_datatype_bytes = "1GiB"          # the same, all sessions together
access_log_bytes = 1048576            # a watched allocation's access log ring (power of two)
max_access_log_bytes = 67108864       # the largest ring a watch may ask for
access_log_full = "block"             # full log: "block" the writing copy, or "fail" it
access_log_block_ms = 10000           # "block": a copy waits this long, then fails
max_flush_ms = 60000                  # the longest an active flush waits
checkpoint_max_deltas = 16            # a longer checkpoint delta chain is merged into its base
checkpoint_threads = 4                # gRPC Checkpoint/Restore/CompactCheckpoint worker threads
max_checkpoint_calls_per_session = 2  # of those queued or running per session
transfer_history = 256                # ended transfers kept for isoctl transfers --recent (0: none)
calibrate = true            # measure channel throughput at start (kept in state_dir)

[runtime]
# Space threshold TH: the largest intermediate buffer (all slots together).
space_threshold = "32MiB"
# Ring depth of every intermediate buffer; 2 or more lets hops overlap.
slots_per_buffer = 2
# Compiled copy programs kept in the memoization cache.
program_cache_entries = 4096
program_cache_bytes = "256MiB"   # and the bytes they may hold together
# Direct copies up to this size run on the submitting thread (latency path).
inline_bytes = "64KiB"
# Transfers this large are planned with the full algorithm, smaller ones
# with the simple one.
full_planner_threshold = "16MiB"
plan_cache_entries = 4096

# GPUs: every detected device gets an FBM memory (gpu0, gpu1, ...) and the
# GPU channels (gpu_write0, gpu_read0, gpu_copy0) unless the file lists FBM
# memories itself; without a GPU none appear and the log says why.
[gpu]
auto_memories = true
staging = "256MiB"          # staging budget (device memory) of each gpu<i>
request_size = "16MiB"      # the GPU channels' request size (4 MiB: 0.93x cudaMemcpy on an H200, 16 MiB: 0.97x)
max_in_flight = 4           # CUDA streams per GPU and channel
# An FBM memory written by hand (the CUDA device number; no client pool):
# [[memory]]
# name = "gpu0"
# kind = "FBM"
# device = 0
# staging = "512MiB"

[[memory]]
name = "sys0"
kind = "SYS"
staging = "256MiB"
pool = "1GiB"               # what clients may allocate here
client_quota = "512MiB"     # per client
hugetlb = false

[[memory]]
name = "reg0"
kind = "REG"
staging = "256MiB"

# Pinned for the GPUs (cudaHostRegister, mapped) where a GPU exists;
# plain host memory elsewhere.
[[memory]]
name = "zcm0"
kind = "ZCM"
staging = "256MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
request_size = "4MiB"
# rate_limit = "2GiB"          # bytes per second; absent or "0" = unlimited
# edges = [["sys0", "reg0"]]   # absent = every pair of host memories

# Clients' private memory (LocalRequest.register_private) to and from every
# host memory by process_vm_readv/writev; the runtime names it "proc".
[[channel]]
name = "cma0"
kind = "cma"
threads = 2
request_size = "4MiB"

# A cluster: list the other daemons, give every node the same secret.
# [cluster]
# node_name = "node-a"            # unique; remote memories are "node-a:sys0"
# secret_file = "/etc/isometry/cluster.secret"
# data_listen = "0.0.0.0:7471"    # data connections from peers
# data_connections = 4            # per peer and direction
# data_max_handshakes = 128       # unauthenticated connections saying hello at once
# checksum = false                # XXH3-64 per chunk
# peer_timeout_ms = 3000
# keepalive_ms = 500
# request_size = "4MiB"           # chunk of a cross-node transfer
# [[peer]]
# name = "node-b"
# address = "10.0.0.2:7470"       # its daemon.grpc_tcp

# Prometheus metrics on GET /metrics (off without this table).
# [metrics]
# listen = "127.0.0.1:9464"
# max_connections = 64            # open at once; a new one closes the oldest
# request_timeout_ms = 2000       # a whole request arrives, and its answer leaves, within this

# Traffic classes (docs/guides/qos.md): tenants share every busy channel by
# weight, with caps per channel kind and a priority ceiling per class. With
# no [qos] table there is one class, "default", and copies are scheduled by
# priority alone. SIGHUP (systemctl reload isometryd) applies a changed [qos].
# [qos]
# default_class = "shared"        # clients no rule matches, gRPC ones too (absent: the first class)
# [[qos.class]]
# name = "interactive"
# weight = 8                      # its share of a busy channel against the other busy classes'
# [[qos.class]]
# name = "shared"
# weight = 2
# max_priority = 50               # copies asking for more run at 50 (daemon.max_priority still refuses)
# [[qos.class]]
# name = "batch"
# weight = 1
# max_priority = 10
# nice = 10                       # its threads yield a busy CPU to other classes' (0 to 19, or "idle")
# caps = { disk_write = { rate = "500MiB/s" }, disk_read = { in_flight = 2 } }  # each channel; 0 pauses
# [[qos.rule]]                    # the first rule that matches wins
# gid = 3000                      # local clients running with group 3000 (gRPC ones have no uid, gid)
# class = "interactive"
# [[qos.rule]]
# uid = 2001
# class = "batch"
# [[qos.rule]]
# client = "backup"               # by name alone: only into a class that gets no more than the default
# class = "batch"
)";

}  // namespace

std::string_view EmbeddedDefaultConfig() { return kDefaultConfig; }

}  // namespace isometry
