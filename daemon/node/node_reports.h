// What the node reports of itself (daemon/node/node.h): who owns a session
// or a transfer, transfers, allocations, memories, channels and the node's
// status. Plain values the servers turn into their wire messages; never a
// credential beyond the opened session's own token.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/runtime_config.h"
#include "core/status.h"
#include "daemon/node/cross_copy.h"
#include "daemon/node/session_ref.h"
#include "daemon/node/transfer_metrics.h"
#include "daemon/runtime/runtime.h"

namespace isometry {

// The peer's credentials as the kernel reported them (SO_PEERCRED); -1
// where the transport does not say (gRPC).
struct Credentials {
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary (SO_PEERGROUPS), for [qos] gid rules
  bool known() const { return uid != static_cast<uid_t>(-1); }
  // The uid DSK files are opened as (CopyRequest::disk_uid): none for
  // sessions without one (gRPC), which act as the daemon's own.
  std::optional<uid_t> disk_uid() const {
    return known() ? std::optional<uid_t>(uid) : std::nullopt;
  }
};

// What anyone may see of a session: never its token.
struct SessionOwner {
  uint64_t session = 0;  // public number ("session 17" in logs and isoctl)
  std::string client;    // the name the client gave
  int64_t uid = -1;      // -1: not known (gRPC does not expose the peer)
  int64_t pid = -1;
};

// An opened session: the token goes to its client only.
struct OpenedSession {
  std::string token;
  uint64_t id = 0;
  SessionRef ref;  // what the opener passes to node calls from now on
};

struct TransferReport {
  uint64_t id = 0;
  SessionOwner owner;
  std::string state;  // waiting, running, done, failed, cancelled
  Status status;
  int priority = 0;  // what it runs at
  // Its traffic class, and the priority it asked for when the class's
  // ceiling lowered it (else equal to `priority`).
  std::string qos_class;
  int requested_priority = 0;
  uint64_t bytes = 0;
  double elapsed_s = 0;
  // The plan's predicted bytes/s (0: no estimate) and, once done, the
  // measured bytes / elapsed_s (0 before).
  double predicted_bytes_per_s = 0;
  double measured_bytes_per_s = 0;
  std::string path;
  std::vector<HopReport> hops;
  // A half of another node's copy: "remote half of a:ID, receiving from
  // a" (empty for this node's own transfers).
  std::string remote_half;
};

// node::Copies::ExplainTransfer: report, path and alternatives, measured vs predicted.
struct TransferExplanation {
  TransferReport transfer;
  PlanReport plan;
  std::string comparison;
  // How its traffic class shaped it: the class and weight, a lowered
  // priority, and per channel of its path the class's share against its
  // weight and the time its caps held it back.
  std::vector<std::string> qos;
};

struct AllocationReport {
  uint64_t id = 0;
  std::string memory;
  uint64_t bytes = 0;
  int fd = -1;           // the node's memfd; borrowed, valid while the allocation lives
  bool watched = false;  // Map: watched and another client's, so no fd
};

// A published allocation whose owner's session has ended (isoctl orphans).
struct OrphanReport {
  uint64_t id = 0;
  std::string memory;
  uint64_t bytes = 0;
  int64_t uid = -1;  // its publisher's; -1: a gRPC client's
};

struct MemoryReport {
  MemoryUsage usage;
  uint64_t pool_capacity = 0;
  uint64_t pool_used = 0;
  uint64_t client_quota = 0;
};

struct ChannelReport {
  ChannelStats stats;
  ChannelConfig config;
  std::vector<std::string> edges;
  std::string limits;  // a network channel's bounds (ChannelInfo.limits)
  double current_bytes_per_s = 0;
  double peak_bytes_per_s = 0;
};

struct NodeStatus {
  uint32_t node = 0;
  double uptime_s = 0;
  uint32_t sessions = 0;
  RuntimeStats runtime;
  uint64_t transfers_active = 0;
  uint64_t allocations = 0;
  uint64_t instances = 0;
  uint64_t datatypes = 0;  // registered handles, all sessions
  uint64_t datatype_translations = 0;
  uint64_t datatype_translations_memoized = 0;
  uint64_t watched_allocations = 0;  // Active Access: allocations with regions
  uint64_t watched_regions = 0;
  FormExchangeStats forms;  // with peers
  // Hop windows of clients that run their own hops (channels/cma/own_hops.h):
  // open now, and counters since the start.
  struct OwnHops {
    uint64_t windows = 0;
    uint64_t runs = 0;
    uint64_t fallbacks = 0;
    uint64_t bogus = 0;
    uint64_t timeouts = 0;
    uint64_t not_lent = 0;
  } own_hops;
  // Direct read leases (docs/guides/client-memory.md, "Direct reads"): granted, revoked because
  // their source range ended, refused (the copy went through the daemon).
  struct DirectReads {
    uint64_t leases = 0;
    uint64_t revoked = 0;
    uint64_t refused = 0;
  } direct_reads;
  // RDMA for network hops: "used: devices rxe0" or "not used: <why>".
  std::string rdma;
  EndedTransfers ended;  // client copies that ended (GET /metrics)
};

// node::TrafficClasses::Report: the traffic classes in force and who is in them
// (docs/guides/qos.md).
struct QosMember {
  uint64_t session = 0;
  std::string client;
  int64_t uid = -1;
  bool by_operator = false;  // put there by the operator (node::TrafficClasses::SetSessionClass)
};
struct QosClassReport {
  QosClassStats stats;
  uint32_t members = 0;
  std::vector<QosMember> member_list;  // for the operator only
  uint64_t clamped = 0;                // copies whose priority its ceiling lowered
};
struct QosReport {
  std::vector<QosClassReport> classes;
  std::string own_class;  // the asking session's ("" for the operator without one)
};

}  // namespace isometry
