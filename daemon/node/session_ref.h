// A session as the boundary resolved its token (node::Sessions::Resolve): the
// session's public number, or none.
//
// Below the boundary (the gRPC service and the local server), node calls
// take a SessionRef, never the token: the credential is compared once,
// where a request comes in, and goes no further. Only the node's sessions
// (daemon/node/sessions.h) make one from a token (or when they open a
// session), so no code below the boundary can
// name a session it was not handed. Numbers are never reused: a ref to a
// session that has ended since names nothing, and a call with it fails as a
// call without a session does ("unknown or closed session").
//
// Thread-safety: a value; copy it freely.
#pragma once

#include <cstdint>

namespace isometry {

namespace node {
class Sessions;
}

class SessionRef {
 public:
  SessionRef() = default;  // none: a caller without a live session
  bool has_value() const { return id_ != 0; }
  uint64_t id() const { return id_; }  // the public number; 0 for none
  bool operator==(const SessionRef&) const = default;

 private:
  friend class node::Sessions;
  explicit SessionRef(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

}  // namespace isometry
