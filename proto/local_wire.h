// Framing of the local handshake socket: a little-endian uint32 length, then
// a serialized LocalRequest/LocalResponse; file descriptors ride along with
// SCM_RIGHTS on the same sendmsg. Used by the daemon and the C++ client.
#pragma once

#include <google/protobuf/message_lite.h>

#include <vector>

#include "core/status.h"

namespace isometry::wire {

inline constexpr uint32_t kMaxFrameBytes = 1u << 20;
inline constexpr int kMaxFds = 4;

// Blocking. Retries EINTR and short writes. A frame that cannot be sent at
// all (too large: OUT_OF_RANGE; not serializable: INVALID_ARGUMENT) fails
// before a byte is written.
Status SendFrame(int socket, const google::protobuf::MessageLite& msg,
                 const std::vector<int>& fds = {});
// Blocking. Returns UNAVAILABLE on orderly EOF (the peer closed), an error
// for a frame over `max_bytes` or malformed. Received fds are owned by the caller
// (closed on error here).
Status RecvFrame(int socket, google::protobuf::MessageLite* msg, std::vector<int>* fds,
                 uint32_t max_bytes = kMaxFrameBytes);

}  // namespace isometry::wire
