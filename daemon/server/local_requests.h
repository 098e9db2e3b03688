// The local socket's requests after hello (allocations, instances, private
// ranges, datatypes, distributed instances, watches and checkpoints): each
// a node call, its answer put into the response. Apart from
// local_server.cc, which keeps the connection, the hello and the rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

// What of a connection's session a request may use; all outlive the call.
struct LocalSessionRefs {
  SessionRef session;                  // resolved at hello
  int cq_event;                        // the client's completion eventfd
  std::atomic<uint32_t>* lease_epoch;  // in the control segment
  std::vector<UniqueFd>* sent_fds;     // fds to keep open until the response is sent
  std::vector<UniqueFd>* passed;       // RegisterPrivate: the client's /proc/self/mem, maps
};

// The fds a received frame came with that its handler takes: with
// RegisterPrivate, the first two (the client's own /proc/self/mem and maps,
// ClientProcess::Open); `req` null (a bad frame) or others: none. Every
// other fd is closed.
std::vector<UniqueFd> KeepPassedFds(const v1::LocalRequest* req, const std::vector<int>& fds);

// Answers `req` (any body but hello) into `resp`; fds to pass along go
// into `fds` (owned by the node, or by `refs.sent_fds`).
Status AnswerLocalRequest(Node& node, const LocalSessionRefs& refs, const v1::LocalRequest& req,
                          v1::LocalResponse* resp, std::vector<int>* fds);

}  // namespace isometry
