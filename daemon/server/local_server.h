// The local shared-memory server: a unix socket where processes on this
// node attach by SO_PEERCRED, receive (SCM_RIGHTS) a control segment with
// their submission and completion rings, eventfds, and the memfds of their
// allocations, then submit copies through the ring (proto/ring_abi.h).
//
// Threads: one accepts, one per client serves its control frames (and ends
// its session when the socket closes), one polls every client's submission
// eventfd and drains the rings. The per-client threads are bounded:
// daemon.max_connection_threads in all (fewer where the task limit at
// start has no room for that many: task_limit.h), and a uid holds at most
// daemon.max_pending_hellos_per_uid connections that have not said hello.
// A connection beyond a bound, or one whose thread the system refuses
// (the task limit: TasksMax=, pids.max, RLIMIT_NPROC), is answered
// RESOURCE_EXHAUSTED naming what ran out and closed; a request or copy
// that needs a thread the system refuses fails alone, with the same code.
#pragma once

#include <sys/types.h>

#include <memory>

#include "daemon/node/node.h"

namespace isometry {

class LocalServer {
 public:
  // Binds config.daemon.local_socket (replacing a stale socket file), sets
  // its mode and group, and starts serving.
  static Result<std::unique_ptr<LocalServer>> Start(Node& node);
  // Stops accepting, closes every client connection (ending their
  // sessions), joins all threads and removes the socket file. A thread
  // still inside a node call after 5 s is left running (logged): the
  // state it uses is then not freed.
  ~LocalServer();

  struct Impl;

 private:
  explicit LocalServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Creates a listening unix socket at `path` with `mode` and, when `group`
// is not empty, that group.
Result<int> ListenUnix(const std::string& path, uint32_t mode, const std::string& group);
// The connected peer's supplementary groups (SO_PEERGROUPS): a [qos] gid
// rule matches any of them, so a client cannot leave a group's class by
// switching its primary group (sg). Empty if the kernel does not say.
std::vector<gid_t> PeerGroups(int fd);
// Creates the socket's directory and removes a stale socket file.
Status PrepareSocketPath(const std::string& path);
// chmod, and chgrp when `group` is not empty (the gRPC socket too).
Status ApplySocketPermissions(const std::string& path, uint32_t mode, const std::string& group);

}  // namespace isometry
