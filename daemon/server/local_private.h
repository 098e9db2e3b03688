// The local socket's requests about a client's own private memory that
// hand it something to run itself: the hop window (OwnHopsRequest) and
// direct read leases (DirectReadRequest). Apart from local_server.cc,
// which keeps the connection and the rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/node/instances.h"
#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

// Makes the session's hop window; its work wake-up writes `cq_event` (the
// client's completion eventfd, duplicated here). The window's memfd goes
// into `fds` (the node keeps it open).
Status AnswerOwnHops(Node& node, SessionRef session, int cq_event, v1::OwnHopsResponse* resp,
                     std::vector<int>* fds);

// Grants a direct read lease (node::Instances::GrantDirectRead) with the session's
// lease_epoch word. The pidfd goes into `fds`; `owned` keeps it open until
// the response is sent.
Status AnswerDirectRead(Node& node, SessionRef session, std::atomic<uint32_t>* epoch,
                        const v1::DirectReadRequest& req, v1::DirectReadResponse* resp,
                        std::vector<int>* fds, std::vector<UniqueFd>* owned);

// The serve window a PublishPrivateRequest names, if any.
std::optional<node::Instances::ServeWindowRef> ServeWindowOf(const v1::PublishPrivateRequest& req);

}  // namespace isometry
