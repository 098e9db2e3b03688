// The data connections between peer daemons: frame format and socket
// helpers (RemoteMemcpy over TCP).
//
// Every frame is a fixed 48-byte header, then `length` payload bytes. A
// connection (after the TLS handshake, when TLS is on) opens with a
// challenge, so nothing a listener records can open another one:
//   A -> B  HELLO      code: A's node id; flags: A wants checksums;
//                      payload: A's nonce
//   B -> A  CHALLENGE  payload: B's fresh nonce
//   A -> B  PROOF      payload: HMAC(session key of A's gRPC hello to B,
//                      "data", A's id, version, A's HELLO flags, A's
//                      nonce, B's nonce)
//   B -> A  HELLO      accepted; flags: checksums on (either side asked),
//                      sealed records from here on (TLS; both ends can);
//                      payload: HMAC(that key, "data-accepted", A's id,
//                      version, these flags, both nonces), checked by A
//        or ABORT      refused, with the reason
// Both MACs cover every option the hello settles: one stripped or flipped
// on the way (on a plain connection) fails the connection
// (hello_acceptor.h, ProofTranscript and AnswerTranscript).
// Then, on a connection node A opened to node B: A sends DATA (chunk k of
// transfer t) only after B sent CREDIT for it, so B never buffers data it
// has no room for; B answers each DATA with ACK (landed; with checksums
// on, only when its checksum held) or RESEND (its checksum failed: A sends
// it once more), and A holds the chunk until then, so a connection that
// drops loses nothing: A reconnects, B credits again what it still waits
// for and repeats its recent ACKs, A re-sends (peer_link_resume.cc). A
// chunk that was landing in place when its connection dropped is credited
// again with `code` = the bytes of it B holds, and A's DATA then carries
// only the rest, `code` saying where it starts (0: the whole chunk).
// ABORT (either way) ends a transfer on both nodes. Fields are in host byte
// order: peers must share an architecture (the hello compares the magic, so a mismatch is refused).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/unique_fd.h"
#include "layout/copy_program.h"

namespace isometry::net {

inline constexpr uint32_t kFrameMagic = 0x4d4f5349;  // "ISOM"
// 3: every DATA is acknowledged (resume after a dropped connection).
// 4: a set of connections has an express one (peer_link.h).
inline constexpr uint16_t kDataProtocolVersion = 4;
inline constexpr uint64_t kMaxControlPayload = 64 << 10;
inline constexpr uint64_t kMaxDataPayload = 1ull << 30;

enum class FrameType : uint8_t {
  kHello = 1,
  kData = 2,
  kCredit = 3,
  kAbort = 4,
  kChallenge = 5,
  kProof = 6,
  kAck = 7,
  kResend = 8,
};
inline constexpr uint8_t kLastFrameType = 8;
// DATA: `checksum` is XXH3-64 of the payload. HELLO: checksums wanted
// (connecting) or on (the answer).
inline constexpr uint8_t kFlagChecksum = 1;
// HELLO: sealed records after the hello wanted (connecting, TLS without
// kTLS) or agreed (the answer): wire.h.
inline constexpr uint8_t kFlagSealed = 2;
// HELLO (connecting): this is the set's express connection (peer_link.h).
inline constexpr uint8_t kFlagExpress = 4;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kHello;
  uint8_t flags = 0;
  uint16_t version = kDataProtocolVersion;
  // ABORT: the status code; HELLO: the sender's node id; CREDIT and DATA:
  // the first byte of the chunk wanted / sent (a resume)
  uint32_t code = 0;
  uint32_t reserved = 0;
  uint64_t transfer = 0;
  uint64_t chunk = 0;
  uint64_t length = 0;  // payload bytes that follow
  uint64_t checksum = 0;
};
static_assert(sizeof(FrameHeader) == 48);

// A status code from the wire: an error code, never OK (an abort that
// claimed success would end a transfer "done" without its data).
inline absl::StatusCode ErrorCodeFromWire(int64_t code) {
  return code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kAborted;
}

// Checks magic, version, type and the payload bound of a received header.
Status CheckHeader(const FrameHeader& h);

// At most this much moves in one send or receive system call on a data
// connection. On a kernel built without preemption (PREEMPT_NONE, as many
// cloud guests' are), a thread copying a large frame keeps its CPU until
// its call returns or sleeps, and a thread woken on that CPU (a small
// copy's, a foreground class's on a link a bulk class keeps busy) waits
// for the whole call; each return is a point where the scheduler can hand
// the CPU over. TLS connections send in batches of the same size
// (wire_records.cc).
inline constexpr size_t kMaxBytesPerCall = 256 << 10;

// Blocking I/O of whole buffers, at most kMaxBytesPerCall a system call;
// errors name the errno. Sends never raise SIGPIPE.
Status SendAll(int fd, struct iovec* iov, int count);
Status SendFrame(int fd, const FrameHeader& h, const void* payload = nullptr);
Status RecvAll(int fd, void* data, uint64_t length);
Status Discard(int fd, uint64_t length);

// True for ConnectTo's answer when nothing listens at the address (the
// host answered with a reset: the daemon there is gone, not unreachable).
bool IsConnectionRefused(const Status& s);
// Connects to "host:port" within `timeout_ms`; the connected socket is
// blocking.
Result<UniqueFd> ConnectTo(const std::string& address, uint32_t timeout_ms);
// Listens on "host:port" (port 0: any); returns the socket and the bound
// address.
Result<std::pair<UniqueFd, std::string>> ListenOn(const std::string& address);
// The other end of a connected socket, "host:port" ("[v6]:port"), or
// "unknown address".
std::string RemoteAddress(int fd);
// Data-connection options: no Nagle, a dead peer noticed within
// `timeout_ms` (unacknowledged data: TCP_USER_TIMEOUT; idle: keepalive),
// and at most `unsent_limit_bytes` not yet sent held by the kernel
// (TCP_NOTSENT_LOWAT: a blocking send waits for room below it, so what a
// connection has queued stays in its own queue, ordered; 0: no limit).
void TuneSocket(int fd, uint32_t timeout_ms, uint64_t unsent_limit_bytes = 0);

// Bytes from the first to the last byte a program touches on its source
// (or destination) side: the size of the dense chunk it reads (writes).
uint64_t SourceSpan(const CopyProgram& p);
uint64_t DestinationSpan(const CopyProgram& p);
// True when the program is one contiguous run starting at offset 0 of the
// side that is the wire (so the bytes go straight to or from memory).
bool WireIsOneRun(const CopyProgram& p, bool wire_is_dst);

}  // namespace isometry::net
