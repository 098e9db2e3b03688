// A client's session, as node::Sessions opened it (a local hello or a gRPC
// Attach) and as the node's services find it from a SessionRef.
//
// Its state follows three rules, by who else can reach it:
// - Who it is (number, token, name, credentials, whose disk quota it
//   uses, where its completions go) is fixed when it opens and read
//   without a lock.
// - What only this session reaches, its registered datatypes and the
//   translations memoized for them, sits behind its own lock
//   (SessionDatatypes): registering a handle, or a copy looking one up,
//   holds the node lock only to find the session, not while the table is
//   read or a form is translated, and waits on no other session's table.
// - Its entries in the node's tables (allocations, instances, transfers,
//   private ranges, leases, pool quota used, traffic class, hop window)
//   are the node lock's (Node::Impl::mu), which the analysis cannot name
//   from here: each changes in the same step as a table other sessions
//   reach too (a published allocation another session maps, a lease
//   revoked when its range ends, a transfer a waiter holds), so a lock of
//   the session's own would only ever be taken inside the node's.
//
// Held by shared_ptr: the node's table and a call that found it
// (Node::Impl::SessionFor) share it, so the call may go on after the node
// lock is released. A closed session is out of the table and its
// datatypes are gone, but it stays valid memory until that call returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "channels/cma/client_process.h"
#include "channels/cma/own_hops.h"
#include "daemon/node/byte_budget.h"
#include "daemon/node/node.h"
#include "daemon/node/session_datatypes.h"

namespace isometry {

class Session {
 public:
  // What a session's limits come from (the daemon's config).
  struct Budgets {
    uint64_t datatype_bytes = 0;                 // daemon.max_datatype_bytes_per_session
    uint64_t watch_scratch_bytes = 0;            // daemon.max_watch_scratch_bytes_per_session
    std::shared_ptr<ByteBudget> node_datatypes;  // every session's together
  };

  // (node_sessions.cc) `name` as the client gave it (cut to kMaxClientName bytes here);
  // `token` the secret that names it ("<id>.<64 hex digits>").
  Session(uint64_t id, std::string token, const std::string& name, const Credentials& creds,
          TransferCallback on_done, const Budgets& budgets);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // ---- who it is: fixed when it opens ----
  const uint64_t id;        // public
  const std::string token;  // secret: never listed or logged
  const std::string name;   // cut to kMaxClientName bytes
  const Credentials creds;  // uid unknown for gRPC sessions
  const std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();
  // Whose disk quota its copies use: "uid N", or "session N" where gRPC
  // hides the uid. Made once: every copy names it.
  const std::string disk_owner;
  const TransferCallback on_done;  // every finished transfer of it; may be empty
  // The scratch buffers of its puts into watched allocations.
  const std::shared_ptr<ByteBudget> scratch_budget;

  // ---- its own lock ----
  SessionDatatypes datatypes;

  // ---- the node lock's ----
  // Its traffic class (config/qos_config.h): by the rules at open and at
  // each reload, unless the operator put it in one (node::TrafficClasses::SetSessionClass).
  std::string qos_class;
  bool qos_by_operator = false;
  std::set<uint64_t> allocations;
  std::set<uint64_t> instances;
  std::set<uint64_t> transfers;
  std::map<size_t, uint64_t> quota_used;  // per pool
  // Its own process, opened at the first RegisterPrivate, and its ranges.
  std::shared_ptr<const ClientProcess> process;
  std::set<uint64_t> private_ranges;
  // Its hop window, when it runs its own hops (EnableOwnHops); closed
  // when the session ends.
  std::shared_ptr<OwnHops> own_hops;
  // Direct reads (node_direct_read.cc): the ranges of other sessions it
  // holds leases on, and its control segment's lease_epoch, which the node
  // bumps when one of them ends. The word lives as long as the session.
  std::set<uint64_t> leased_ranges;
  std::atomic<uint32_t>* lease_epoch = nullptr;
};

}  // namespace isometry
