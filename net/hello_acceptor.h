// The data port: one event loop (epoll) accepts peers' data connections
// and runs the accepting side of each one's hello (TLS when on, then the
// challenge of frame.h) without a thread per connection.
//
// Bounds, so that anyone who reaches the port cannot exhaust the daemon:
// - at most `max_pending` connections say hello at once; a new one beyond
//   that closes the oldest (a real peer's hello takes milliseconds, an
//   idle attacker's stays until its deadline), once the oldest had
//   timeout_ms / 10 (at most 100 ms): until then the kernel's backlog
//   holds new ones, so a flood costs at most max_pending accepts per
//   100 ms, not one per connection attempt;
// - a hello has `timeout_ms` in all (TLS included): then its connection is
//   closed and everything it held is freed;
// - before the proof, a connection holds a socket, a few hundred bytes and,
//   with TLS, an SSL object with small buffers (none while it is idle);
// - out of file descriptors (EMFILE, ENFILE) or memory, accept backs off
//   (50 ms, doubling to 1 s), closes the oldest unauthenticated
//   connection, and tries again: the loop never ends before the acceptor.
// Refusals are logged, rate-limited, with the address they came from.
//
// Threading: Start runs the loop on its own thread; `check` and `admitted`
// are called on it (keep them short). The destructor stops the loop and
// closes every connection still saying hello.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "net/wire.h"

namespace isometry::net {

// What a connecting node sent to say who it is (frame.h, the hello).
struct HelloProof {
  uint32_t node = 0;  // the id it claims
  std::string client_nonce, server_nonce, proof;
  uint8_t flags = 0;         // of its HELLO (the options it asked for)
  uint8_t answer_flags = 0;  // of the HELLO that accepts it (the options settled)
};
// What the proof MACs (with the session key), and what the accepting
// HELLO's MAC covers: the node, the protocol version, the options and both
// nonces (frame.h).
std::vector<std::string> ProofTranscript(const HelloProof& hello);
std::vector<std::string> AnswerTranscript(const HelloProof& hello);
// Who a connecting node proved to be, and the MAC of the accepting HELLO
// (of AnswerTranscript, with the same session key).
struct HelloAnswer {
  std::string peer, mac;
};

class HelloAcceptor {
 public:
  struct Options {
    uint32_t timeout_ms = 3000;             // for the whole hello
    int max_pending = 128;                  // connections saying hello at once
    std::shared_ptr<const TlsContext> tls;  // null: plain TCP
    bool checksum = false;                  // this node asks for checksums
  };
  // Says which peer a connecting node is, by its proof, and signs the
  // answer; an error refuses the connection (its message goes back in the
  // ABORT frame).
  using Check = std::function<Result<HelloAnswer>(const HelloProof& hello)>;
  // What a connection's hello settled.
  struct Settled {
    bool checksum = false;
    bool express = false;  // the connecting node's express connection
  };
  // A connection whose hello succeeded (the HELLO answer sent, blocking
  // I/O again for plain TCP). An error is logged and closes it.
  using Admitted = std::function<Status(const std::string& peer, std::unique_ptr<Wire> wire,
                                        const Settled& settled)>;

  // Serves `listen` (a bound, listening socket) until destroyed. Errors:
  // the loop could not be set up (epoll, eventfd, its thread).
  static Result<std::unique_ptr<HelloAcceptor>> Start(UniqueFd listen, const Options& options,
                                                      Check check, Admitted admitted);
  virtual ~HelloAcceptor() = default;
};

}  // namespace isometry::net
