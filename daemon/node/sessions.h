// Sessions: open, resolve a token, close; and the listing of them (node_sessions.cc,
// node_inventory.cc).
// Node::sessions() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Sessions {
 public:
  explicit Sessions(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Sessions. `on_transfer_done` receives every finished transfer of the
  // session (the completion stream / ring); it may be empty. Refused with
  // RESOURCE_EXHAUSTED beyond daemon.max_sessions, max_sessions_per_uid
  // (credentials known) or max_grpc_sessions (not known).
  Result<OpenedSession> OpenSession(const std::string& client_name, const Credentials& creds,
                                    TransferCallback on_transfer_done);

  void CloseSession(SessionRef session);

  // The session `token` names, resolved at the boundary once per request
  // (session_ref.h); none for a wrong token or a closed session (the same
  // answer, and the token never echoed).
  SessionRef Resolve(const std::string& token) const;

  // Every session and allocation (`only` null: the operator), or those of
  // the session `only` (node_inventory.cc).
  Result<std::vector<SessionListing>> ListSessions(const SessionRef* only) const;

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
