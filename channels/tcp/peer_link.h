// The data connections with one peer daemon, and the credit protocol that
// paces a cross-node hop (frame.h).
//
// Outgoing connections (this node connected them) carry the DATA of hops
// whose sending half runs here; incoming ones (the peer connected them)
// carry the DATA of hops whose receiving half runs here. A transfer's
// chunk k always travels on connection k % n, so a transfer is striped
// over all of them. Every connection has a reader and a writer thread:
// blocking I/O on a few connections with megabyte frames is what an event
// loop would reduce to, without its extra copy-out of the ready list (see
// README, "Network channel").
//
// Receiving half: Post() remembers where chunk k goes and sends CREDIT;
// the DATA that follows lands straight in the destination or ring slot
// (one contiguous run) or is scattered from a bounce buffer. Sending half:
// Send() waits for the credit, then writes the chunk (straight from
// memory when it is one run); with checksums on (the connection's hello
// settles it) the chunk's request completes only at the receiver's ACK,
// and a RESEND sends it once more. Any broken connection fails every request
// in flight with UNAVAILABLE and takes the link down until Connect().
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "channels/channel.h"
#include "channels/rate_limiter.h"
#include "channels/tcp/frame.h"
#include "channels/tcp/wire.h"
#include "core/unique_fd.h"

namespace isometry::net {

struct DataOptions {
  std::string node_name;             // this node's, for errors
  std::string listen = "0.0.0.0:0";  // data connections from peers
  int connections = 4;               // per peer and direction
  // XXH3-64 per chunk, checked by the receiver; on when either end of a
  // connection asks for it. A chunk whose checksum fails is sent once more.
  bool checksum = false;
  uint32_t timeout_ms = 3000;           // a silent peer is dead after this
  uint64_t rate_limit_bytes_per_s = 0;  // sending cap per peer; 0 = none
  // Mutual TLS on every data connection; null: plain TCP.
  std::shared_ptr<const TlsContext> tls;
  // Fault injection for tests: the receiver flips a byte of this chunk
  // (of every transfer) before checking it; only its first arrival when
  // corrupt_once.
  std::optional<uint64_t> corrupt_chunk;
  bool corrupt_once = false;
};

// Runs closures one at a time, in order, on its own thread: failure
// completions (never inside the call that caused them, which may hold the
// runtime's lock), and the cluster layer's set-up work. The destructor runs
// what is queued, then joins.
class Completer {
 public:
  Completer();
  ~Completer();
  void Post(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class PeerLink {
 public:
  // `on_down` gets the reason and the generation (see generation()) of the
  // connections that broke.
  PeerLink(std::string peer, const DataOptions& options, Completer* completer,
           std::function<void(const Status&, uint64_t)> on_down);
  ~PeerLink();

  const std::string& peer() const { return peer_; }
  // The proof of a connection's hello (frame.h) from the two nonces, made
  // with the session key of this node's gRPC hello to the peer.
  using Prover =
      std::function<std::string(const std::string& client_nonce, const std::string& server_nonce)>;
  // Opens this node's connections to the peer (closing old ones).
  Status Connect(const std::string& address, uint32_t self_node, const Prover& prove)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A connection the peer opened, after its hello was accepted; `checksum`:
  // what the hello settled.
  void AddIncoming(std::unique_ptr<Wire> wire, bool checksum);
  // Closes every connection and fails what is in flight with `why`;
  // `notify` reports it to on_down.
  void Fail(const Status& why, bool notify = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts Connect()s: a down report about an older generation is stale.
  uint64_t generation() const;

  void Send(const ChannelRequest& request, RequestDone done);
  void Post(const ChannelRequest& request, RequestDone done);
  void Abandon(uint64_t transfer, const Status& why);

  // How this node's connections run: "TLS 1.3, kTLS", "plain, checksums",
  // ... (see PeerInfo.data_link); empty when none is open.
  std::string security() const ABSL_LOCKS_EXCLUDED(mu_);
  int outgoing() const;
  int incoming() const;
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;

 private:
  struct Job;
  struct Conn;
  using Key = std::pair<uint64_t, uint64_t>;  // (transfer, chunk)
  struct Request {
    ChannelRequest request;
    RequestDone done;
  };

  // One outgoing connection, its hello answered (link_hello.cc).
  Result<std::shared_ptr<Conn>> Open(const std::string& address, uint32_t self_node,
                                     const Prover& prove);
  void StartConn(const std::shared_ptr<Conn>& c);
  void Reader(Conn* c);
  void Writer(Conn* c);
  Status WriteJob(Conn& c, Job& job);
  Status ReceiveData(Conn& c, const FrameHeader& h);
  // A received chunk's checksum (and the corrupt-chunk fault): on a
  // mismatch the chunk is asked for once more (`r` goes back to the posted
  // ones), then failed with node, transfer, chunk and offset; `r` is empty
  // afterwards unless the chunk is good (peer_link_checksum.cc).
  Status CheckChunk(Conn& c, const FrameHeader& h, std::optional<Request>& r, std::byte* data,
                    uint64_t span) ABSL_LOCKS_EXCLUDED(mu_);
  // ACK / RESEND of a chunk this node sent on `c`.
  Status OnAnswer(Conn& c, const FrameHeader& h) ABSL_LOCKS_EXCLUDED(mu_);
  // The receiver's answer to a checksummed chunk.
  void Answer(Conn& c, FrameType type, const FrameHeader& h);
  void OnAbortFrame(const FrameHeader& h, const std::string& message) ABSL_LOCKS_EXCLUDED(mu_);
  void Enqueue(Conn& c, Job job);
  void FailConn(Conn* c, const Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  void FailLocked(const Status& why, std::vector<std::function<void()>>& calls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonLocked(uint64_t transfer, const Status& why,
                     std::vector<std::function<void()>>& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneDeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails `done` (on the completer) when `transfer` has ended or the link
  // lacks the connection the request needs; true when it did.
  bool RefusedLocked(uint64_t transfer, bool connected, const char* unconnected, RequestDone& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string peer_;
  const DataOptions options_;
  Completer* const completer_;
  const std::function<void(const Status&, uint64_t)> on_down_;
  RateLimiter limiter_;

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Conn>> out_ ABSL_GUARDED_BY(mu_);  // live connections
  std::vector<std::shared_ptr<Conn>> in_ ABSL_GUARDED_BY(mu_);
  // Joined later, off their own threads.
  std::vector<std::shared_ptr<Conn>> closed_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Request> posted_ ABSL_GUARDED_BY(mu_);          // receiving: chunk -> where it goes
  std::map<Key, Request> waiting_credit_ ABSL_GUARDED_BY(mu_);  // sending: chunk -> what to send
  std::set<Key> credits_ ABSL_GUARDED_BY(mu_);  // credits that came before the chunk
  // Sending, checksums on: chunks sent, held until the receiver's ACK.
  std::map<Key, Request> unacked_ ABSL_GUARDED_BY(mu_);
  std::set<Key> resent_ ABSL_GUARDED_BY(mu_);        // sending: chunks sent twice
  std::set<Key> resend_asked_ ABSL_GUARDED_BY(mu_);  // receiving: chunks asked for again
  std::set<Key> corrupted_ ABSL_GUARDED_BY(mu_);     // fault injection, corrupt_once
  std::map<uint64_t, std::pair<Status, std::chrono::steady_clock::time_point>> dead_
      ABSL_GUARDED_BY(mu_);
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isometry::net
