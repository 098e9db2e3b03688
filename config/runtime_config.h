// Typed runtime configuration: memories, channels, buffer limits.
//
// Parsed once from TOML (or the embedded default) and validated; the
// runtime, channels and tools receive these structs and never read the
// environment or files themselves.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config_origin.h"
#include "config/gpu_config.h"
#include "config/qos_config.h"
#include "config/rdma_config.h"
#include "core/channel_kind.h"
#include "core/memory.h"
#include "core/status.h"

namespace isometry {

struct MemoryConfig {
  std::string name;  // unique on this node, e.g. "sys0"
  MemoryKind kind = MemoryKind::kSys;
  // Budget for the runtime's intermediate buffers in this memory: the sum of
  // all transfers' staging here never exceeds it; transfers that do not fit
  // wait in the admission queue.
  uint64_t staging_bytes = 256ull << 20;
  // Daemon pool: bytes clients may allocate in this memory (0: clients
  // cannot allocate here), the most one client may hold, and whether to
  // back allocations with huge pages (falls back to normal pages, with a
  // log line, where the system has none).
  uint64_t pool_bytes = 0;
  uint64_t client_quota = 0;  // 0 = pool_bytes
  bool hugetlb = false;
  // DSK memories: the directory whose files are its instances.
  std::string directory;
  // DSK memories (daemon/runtime/disk_memory.h): the largest file a write
  // may produce; per client uid, the total size of the files its copies
  // are writing here at once; whether files with several hard links may be
  // read or replaced.
  uint64_t max_file_bytes = 64ull << 30;
  uint64_t quota_bytes = 256ull << 30;
  bool allow_hard_links = false;
  // FBM memories: the GPU (the CUDA runtime's device number) whose memory
  // it is; -1 elsewhere. Its staging is device memory of that GPU.
  int device = -1;
};

struct ChannelConfig {
  std::string name;  // unique, shown by isoctl
  ChannelKind kind = ChannelKind::kMemcpy;
  // Directed memory pairs (by name) this channel serves. Empty: by kind,
  // every pair of host memories (memcpy, self-loops included), every DSK to
  // host memory (disk_read), every host to DSK memory (disk_write). A cma
  // channel takes none: its ends are clients' registered process memories,
  // not [[memory]] entries (channels/channel_edges.h: ChannelEdges).
  std::vector<std::pair<std::string, std::string>> edges;
  int threads = 2;                      // worker threads
  int max_in_flight = 0;                // requests in flight; 0 = the kind's default
  uint64_t request_bytes = 4ull << 20;  // preferred request size
  // Bandwidth cap in bytes/s for QoS; 0 = unlimited.
  uint64_t rate_limit_bytes_per_s = 0;
  // remote_memcpy only: the peer (its cluster.node_name) whose data link
  // the channel uses. These channels are not written in the file: the
  // daemon makes one per [[peer]] (PeerChannels, channels/added_channels.h). kAnyPeer: the
  // channel of the peers learnt from etcd, each request naming its peer.
  std::string peer;
};
// No node is named this (node names have no ':').
inline constexpr std::string_view kAnyPeer = ":etcd";

struct RuntimeConfig {
  uint32_t node = 0;
  std::vector<MemoryConfig> memories;
  std::vector<ChannelConfig> channels;
  // Space threshold TH (Isometry §4.1): no intermediate buffer (all its
  // slots together) is larger.
  uint64_t space_threshold = 32ull << 20;
  int slots_per_buffer = 2;  // ring depth of intermediate buffers (>= 2 pipelines)
  size_t program_cache_entries = 4096;
  // Bytes the cached programs may hold together: entries alone do not
  // bound memory (one blocked 4-D program can take tens of MB).
  uint64_t program_cache_bytes = 256ull << 20;
  // Direct (one-hop) copies up to this many bytes on a channel without a
  // rate cap run on the submitting thread, skipping the DMA worker: the
  // small-copy latency path. They are smaller than one request, so they
  // delay a high-priority transfer by less than a request time. 0 = off.
  uint64_t inline_bytes = 0;
  // A transfer larger than this writes its last hop with streaming
  // stores (it would only evict the cache). 0 = this machine's last-level
  // cache size, as isometryd runs; not a config file key (tests set it so
  // that their copies need not outgrow a large cache).
  uint64_t stream_above_bytes = 0;
  // Transfers of at least this many bytes are planned with the full
  // algorithm (Isometry §4.2), smaller ones with the simple one (§4.4).
  uint64_t full_planner_threshold = 16ull << 20;
  size_t plan_cache_entries = 4096;
  // Measure each channel's throughput function at start (Isometry §4.1),
  // reusing `calibration_file` when it was made on this hardware with
  // these channel settings. Off: every edge counts as 1 GB/s.
  bool calibrate = false;
  std::string calibration_file;  // empty: measure, do not keep
  uint32_t calibration_budget_ms = 1500;

  // Cross-field checks: unique names, written edges naming known
  // memories, sane numbers. What a channel's kind allows (which kinds of
  // memory it joins, its default edges, whether it takes edges or a rate
  // limit or may be written at all) and one channel per edge are the
  // channel descriptors' (channels/channel_edges.h: CheckChannelKinds).
  Status Validate() const;
};

// The daemon's own settings ([daemon] in the file).
struct DaemonConfig {
  std::string local_socket = "/run/isometry/isometry.sock";  // shared-memory handshake
  std::string grpc_socket = "/run/isometry/grpc.sock";       // gRPC over a unix socket
  std::string grpc_tcp;      // "host:port" to also listen on TCP; empty = off
  std::string socket_group;  // group owning both sockets; empty = the daemon's
  uint32_t socket_mode = 0660;
  std::string log_level = "info";  // trace, debug, info, warn, error
  std::string state_dir = "/var/lib/isometry";
  uint32_t sq_entries = 256;  // per-client submission ring
  uint32_t cq_entries = 256;  // per-client completion ring (bounds copies in flight)
  uint32_t max_sessions = 1024;
  // Per-client bounds (docs/operations/security.md, "Security model"): one client's exhaustion
  // never denies service to others.
  uint32_t max_sessions_per_uid = 512;  // local-socket sessions of one uid
  // gRPC does not expose the peer's uid (grpc/grpc#15511): gRPC sessions
  // share this budget, apart from the local-socket clients'.
  uint32_t max_grpc_sessions = 256;
  uint32_t max_connections_per_uid = 512;  // local-socket connections of one uid
  uint32_t hello_timeout_ms = 5000;        // a local connection must say hello by then
  // Local-socket connections of one uid that have not said hello yet: well
  // below max_sessions, so connections that never say hello cannot keep
  // other users from connecting.
  uint32_t max_pending_hellos_per_uid = 64;
  // Threads serving local-socket connections (one each, before and after
  // hello): a connection beyond is refused with RESOURCE_EXHAUSTED. Part
  // of the task bound the systemd unit's TasksMax= allows (docs/operations/systemd.md, "As a system
  // service").
  uint32_t max_connection_threads = 1024;
  uint32_t max_transfers_per_session = 1024;    // in flight
  uint32_t max_allocations_per_session = 1024;  // each is a memfd the daemon holds
  uint32_t max_instances_per_session = 16384;
  // Ranges of its own memory a local-socket session may register for CMA.
  uint32_t max_private_ranges_per_session = 64;
  // Hops a client runs itself (docs/guides/client-memory.md, "Hops the client runs itself"): the
  // size of the hop window a session that asks gets (MiB of shared memory;
  // 0 refuses every ask) and how long the daemon waits for the client to
  // run one hop before that copy fails.
  uint32_t own_hop_window_mib = 16;
  // Direct read leases (docs/guides/client-memory.md, "Direct reads"): whether local clients may
  // read a published private range of another process themselves, which
  // bypasses the channel queues and priorities. false refuses every lease.
  bool direct_reads = true;
  // After serving a submission the ring thread keeps polling every ring
  // for this many microseconds before it sleeps in epoll (0: never polls).
  uint32_t ring_poll_us = 50;
  // A CPU wake-up latency request (microseconds) the daemon holds while it
  // runs (daemon/cpu_latency.h); absent: the node's idle states are left
  // alone.
  std::optional<uint32_t> cpu_latency_us;
  uint32_t own_hop_timeout_ms = 10000;
  // Datatypes a session may register (RegisterDatatype handles).
  uint32_t max_datatypes_per_session = 1024;
  // gRPC calls that translate a datatype (RegisterDatatype, ExplainPlan,
  // RegisterInstance of one) run on translate_threads threads behind a
  // queue of translate_queue; a session (the session-less callers
  // together) may have max_translates_per_session queued or running; a
  // request's datatypes may weigh at most max_translate_weight (nodes and
  // array entries, core/datatype.h). RESOURCE_EXHAUSTED past each.
  uint32_t translate_threads = 2;
  uint32_t translate_queue = 32;
  uint32_t max_translates_per_session = 2;
  uint32_t max_translate_weight = 1 << 20;
  // Distributed instances (M:N redistribution) one uid may have named at
  // once, and the piece copies one Redistribute runs at a time.
  uint32_t max_distributed_per_uid = 64;
  uint32_t redistribute_concurrency = 8;
  // Active Access (docs/guides/active-access.md, "Active Access"): watched regions one session
  // may hold over all its allocations, the access log ring of a watched
  // allocation (default and largest size, bytes, powers of two), what a
  // full log does to the writing copy ("block": it waits up to
  // access_log_block_ms, then fails; "fail": it fails at once, nothing
  // applied), and the longest an active flush may wait.
  uint32_t max_watched_regions_per_session = 64;
  // The highest copy priority a client may ask for (PERMISSION_DENIED
  // above it): priority_ceilings' entry for its uid, else max_priority
  // (gRPC clients, whose uid is unknown, get max_priority).
  int32_t max_priority = 100;
  std::map<uint32_t, int32_t> priority_ceilings;
  // Watched allocations, each with a worker thread: per session and on
  // the node in all (Watch is RESOURCE_EXHAUSTED past either).
  uint32_t max_watched_allocations_per_session = 16;
  uint32_t max_watch_threads = 256;
  // Completion events a gRPC session's Attach stream holds while its
  // client does not read them (their encoded bytes); beyond, they are
  // dropped and the next event says how many (daemon/server/attach_stream.h).
  uint64_t max_attach_backlog_bytes = 1ull << 20;
  // Bytes of puts into watched allocations waiting in scratch buffers
  // until their watch applies them, per session and in all.
  uint64_t max_watch_scratch_bytes_per_session = 256ull << 20;
  uint64_t max_watch_scratch_bytes = 1ull << 30;
  // Memory of registered datatypes (their trees and the translations kept
  // for them), per session and in all (RegisterDatatype past either).
  uint64_t max_datatype_bytes_per_session = 64ull << 20;
  uint64_t max_datatype_bytes = 1ull << 30;
  uint32_t access_log_bytes = 1u << 20;
  uint32_t max_access_log_bytes = 64u << 20;
  std::string access_log_full = "block";
  uint32_t access_log_block_ms = 10000;
  uint32_t max_flush_ms = 60000;
  // Incremental checkpoints: a delta chain longer than this is merged into
  // its base by the checkpoint that would lengthen it.
  uint32_t checkpoint_max_deltas = 16;
  // gRPC Checkpoint, Restore and CompactCheckpoint run on this many
  // threads; one session may have this many queued or running at once.
  uint32_t checkpoint_threads = 4;
  uint32_t max_checkpoint_calls_per_session = 2;
  uint32_t shutdown_grace_ms = 5000;  // SIGTERM: time in-flight transfers get to finish
  // Ended transfers whose final report the daemon keeps for isoctl
  // transfers --recent (ListTransfers recent); 0 keeps none.
  uint32_t transfer_history = 256;
  // Calibrate channels at start, kept in state_dir/calibration.toml.
  bool calibrate = true;

  Status Validate() const;
};

// A peer daemon ([[peer]] in the file).
struct PeerConfig {
  std::string name;     // its cluster.node_name
  std::string address;  // its gRPC TCP address (its daemon.grpc_tcp), "host:port"
  // The link's rate to it, bytes/s, as the planner costs it (0: the
  // cluster's link_rate). Told to every peer, which may then plan paths
  // through this node (relays) where its links are faster.
  uint64_t link_bytes_per_s = 0;
};

// Mutual TLS between the nodes of a cluster ([cluster.tls]): PEM files.
// Every node's certificate is signed by the CA and names the node's
// cluster.node_name (a DNS subjectAltName, or the common name).
struct TlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;  // mode 0600; its contents are never logged

  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// Joining daemons into one cluster ([cluster] in the file). Without peers
// the daemon is a single node and none of this is used.
// Membership through etcd ([cluster.etcd]): this node registers itself
// under `prefix` + its node_name with a lease it keeps alive, and takes
// the other keys under `prefix` as peers besides the static [[peer]]s.
// etcd says where peers are, never whom to trust: they authenticate like
// static peers (the secret and/or mutual TLS).
struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port" of etcd's client URL; empty: off
  std::string prefix = "/isometry/nodes/";
  uint32_t lease_ttl_s = 10;  // a node that stops renewing is gone this long after
  uint32_t poll_ms = 1000;    // how often the prefix is read
  // The gRPC address peers reach this node at; empty: daemon.grpc_tcp
  // (a wildcard host replaced by 127.0.0.1).
  std::string advertise;

  bool enabled() const { return !endpoints.empty(); }
};

struct ClusterConfig {
  std::string node_name = "local";  // unique in the cluster; names this node's memories
  // A file holding the shared secret every node of the cluster has (at
  // least 16 bytes; keep it mode 0600). Required with peers unless
  // [cluster.tls] is set.
  std::string secret_file;
  TlsConfig tls;
  std::string data_listen = "0.0.0.0:0";  // data connections from peers (port 0: any)
  int data_connections = 4;               // per peer and direction; chunks are striped
  int data_max_handshakes = 128;          // unauthenticated hellos at once on the data port
  bool checksum = false;                  // XXH3-64 of every chunk, checked on arrival
  uint32_t peer_timeout_ms = 3000;        // a peer silent this long is down
  uint32_t keepalive_ms = 500;            // ping interval (round-trip time in isoctl peers)
  uint64_t request_bytes = 4ull << 20;    // chunk size of cross-node transfers
  // A copy to a peer of at most this many bytes, from this node's pool
  // memory into a same-shaped allocation there, one contiguous run at
  // both ends, goes whole in one PutBytes call (no halves, no data link).
  // 0: never.
  uint64_t eager_put_bytes = 0;
  uint64_t rate_limit_bytes_per_s = 0;  // sending cap per peer; 0 = none
  // Unsent bytes a data connection lets the kernel hold (TCP_NOTSENT_LOWAT):
  // the rest waits in the link's queue, where a foreground class's chunk
  // can pass it (docs/guides/qos.md). 0: the kernel's default, no limit.
  uint64_t unsent_limit_bytes = 128u << 10;
  // Throughput the planner assumes for the network hop until measured.
  uint64_t link_bytes_per_s = 1250000000ull;
  std::vector<PeerConfig> peers;
  EtcdConfig etcd;

  // Whether this node is in a cluster at all: static peers or etcd.
  bool clustered() const { return !peers.empty() || etcd.enabled(); }
  Status Validate() const;
};

// The Prometheus text endpoint ([metrics] in the file): GET /metrics over
// plain HTTP. Off without the table; the table alone serves the default
// address.
struct MetricsConfig {
  bool enabled = false;
  std::string listen = "127.0.0.1:9464";  // "host:port" or "[v6]:port"
  // Connections open at once; a new one beyond closes the oldest.
  uint32_t max_connections = 64;
  // A request must arrive whole, and its answer be taken, within this.
  uint32_t request_timeout_ms = 2000;

  Status Validate() const;
};

// A listen address split into its host (brackets of an IPv6 literal
// removed) and a port from 1 to 65535.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> ParseHostPort(std::string_view address);

struct Config {
  RuntimeConfig runtime;
  DaemonConfig daemon;
  ClusterConfig cluster;
  MetricsConfig metrics;
  RdmaConfig rdma;  // [rdma]: whether network hops may use RDMA
  GpuConfig gpu;    // [gpu]: the GPU memories added per detected device
  QosConfig qos;    // [qos]: traffic classes (reloaded on SIGHUP)
  // Where the file wrote each key (for FILE:LINE in later checks' errors).
  ConfigOrigin origin;

  // All three parts' checks and those across them (peers need grpc_tcp).
  // Errors are ConfigKeyErrors: origin.Locate points them at their line.
  Status Validate() const;
};

// A single node with SYS, REG and ZCM host memories and one Memcpy channel.
RuntimeConfig DefaultRuntimeConfig();

}  // namespace isometry
