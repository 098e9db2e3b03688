// The data connections with one peer daemon, and the credit protocol that
// paces a cross-node hop (frame.h).
//
// Outgoing connections (this node connected them) carry the DATA of hops
// whose sending half runs here; incoming ones (the peer connected them)
// carry the DATA of hops whose receiving half runs here. A set is
// `connections` bulk connections and one express connection. A transfer's
// chunk k travels on bulk connection k % n, so a transfer is striped over
// all of them; a chunk of at most kExpressChunkBytes travels on the
// express one instead. Bytes a writer handed to the kernel are beyond any
// scheduler: on a bulk connection, megabytes of credited bulk chunks sit
// in the socket buffers, and a small chunk queued behind them would wait
// for all of them whatever its class or priority. Every connection has a
// reader and a writer thread:
// blocking I/O on a few connections with megabyte frames is what an event
// loop would reduce to, without its extra copy-out of the ready list (see
// docs/guides/cluster.md, "RemoteMemcpy over TCP").
//
// Receiving half: Post() remembers where chunk k goes and sends CREDIT;
// the DATA that follows lands straight in the destination or ring slot
// (one contiguous run) or is scattered from a bounce buffer. Sending half:
// Send() waits for the credit, then writes the chunk (straight from
// memory when it is one run); the chunk's request completes only at the
// receiver's ACK (with checksums on, the connection's hello settles it, a
// RESEND sends it once more).
//
// Resume (peer_link_resume.cc): a broken connection loses nothing. The
// sending direction closes its set, keeps every chunk not yet ACKed and
// reconnects; the receiving direction keeps what it waits for and, once
// the peer's new set is in, credits it again and repeats its recent ACKs.
// Chunks are idempotent at the receiver (one credit, one landing). Only a
// peer unreachable for timeout_ms (or refusing connections: its daemon
// is gone) fails what is in flight, with UNAVAILABLE, and takes the link
// down until Connect().
#pragma once

#include <array>
#include <atomic>
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
#include "core/log_limiter.h"
#include "core/rate_limiter.h"
#include "core/unique_fd.h"
#include "net/chunk.h"
#include "net/frame.h"
#include "net/wire.h"

namespace isometry::net {

// The largest chunk that travels on a set's express connection.
inline constexpr uint64_t kExpressChunkBytes = 256 << 10;

struct DataOptions {
  std::string node_name;             // this node's, for errors
  std::string listen = "0.0.0.0:0";  // data connections from peers
  int connections = 4;               // bulk ones per peer and direction; plus one express
  // XXH3-64 per chunk, checked by the receiver; on when either end of a
  // connection asks for it. A chunk whose checksum fails is sent once more.
  bool checksum = false;
  uint32_t timeout_ms = 3000;  // a silent peer is dead after this
  // Connections saying hello at once on the data port (hello_acceptor.h).
  int max_handshakes = 128;
  uint64_t rate_limit_bytes_per_s = 0;  // sending cap per peer; 0 = none
  // TCP_NOTSENT_LOWAT of every data connection (frame.h, TuneSocket).
  uint64_t unsent_limit_bytes = 0;
  // Mutual TLS on every data connection; null: plain TCP.
  std::shared_ptr<const TlsContext> tls;
  // Fault injection for tests: the receiver flips a byte of this chunk
  // (of every transfer) before checking it; only its first arrival when
  // corrupt_once.
  std::optional<uint64_t> corrupt_chunk;
  bool corrupt_once = false;
  // Fault injection for tests (resume): the receiver shuts the connection
  // down as this chunk arrives; or after landing this one, in place of its
  // ACK. Once per transfer each.
  std::optional<uint64_t> drop_chunk;
  std::optional<uint64_t> drop_after_chunk;
  // ... or half-way through this chunk (its first half landed in place).
  std::optional<uint64_t> drop_mid_chunk;
  // ... and the thread that dropped it then stalls this long, so the peer
  // reconnects before this node sees its old connections break (the order
  // a loaded machine can give).
  uint32_t drop_stall_ms = 0;
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
  // The MAC of a transcript of a connection's hello (frame.h; the proof
  // and the check of the answer), made with the session key of this
  // node's gRPC hello to the peer.
  using Prover = std::function<std::string(const std::vector<std::string>& transcript)>;
  // Opens this node's connections to the peer (closing old ones); a
  // broken set is re-opened with the same address and prover.
  Status Connect(const std::string& address, uint32_t self_node, const Prover& prove)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A connection the peer opened, after its hello was accepted; `checksum`
  // and `express`: what the hello settled. An error (no thread for it)
  // closes it.
  Status AddIncoming(std::unique_ptr<Wire> wire, bool checksum, bool express = false);
  // Closes every connection and fails what is in flight with `why`;
  // `notify` reports it to on_down.
  void Fail(const Status& why, bool notify = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts Connect()s: a down report about an older generation is stale.
  uint64_t generation() const;

  // Sending half: `chunk` goes out once the receiver credits it; `done`
  // runs at the receiver's ACK (or failure).
  void Send(const Chunk& chunk, ChunkDone done);
  // Receiving half: `chunk` is credited to the peer and lands in place.
  void Post(const Chunk& chunk, ChunkDone done);
  void Abandon(uint64_t transfer, const Status& why);

  // How this node's connections run: "TLS 1.3, kTLS", "plain, checksums",
  // ... (see PeerInfo.data_link); empty when none is open.
  std::string security() const ABSL_LOCKS_EXCLUDED(mu_);
  int outgoing() const;
  int incoming() const;
  // The peer's connections to this node are open, or broke and a resume
  // waits for them (Post() takes chunks either way): a copy planned now
  // waits through the resume instead of failing.
  bool receiving() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t bytes_sent() const;
  // Of them, over the express connection.
  uint64_t express_bytes_sent() const;
  uint64_t bytes_received() const;
  // Times a set of connections broke and a resume began (either direction).
  uint64_t resumes() const;
  // The peer answers again after an outage that began at `since`: when
  // chunks are in flight and no connection got a frame since, the sets
  // are stuck in TCP's retransmission backoff; they are re-opened now.
  void Nudge(std::chrono::steady_clock::time_point since) ABSL_LOCKS_EXCLUDED(mu_);
  // The peer was heard (the cluster layer's ping answered): a resume
  // counts its time limit from the last time the peer was heard at all.
  void Heard(std::chrono::steady_clock::time_point when);
  // The last frame from the peer on any connection, or Heard(); the
  // epoch when never.
  std::chrono::steady_clock::time_point last_heard() const;
  // Incoming connections whose reader has received a chunk's bytes at its
  // class's lowered nice value for `after` or longer go on at the
  // daemon's own value (a busy node starves them; the data plane's guard
  // calls this). readers_lifted() counts them.
  void LiftStarvedReaders(std::chrono::nanoseconds after) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t readers_lifted() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job;
  struct Conn;
  using Key = std::pair<uint64_t, uint64_t>;  // (transfer, chunk)
  struct Request {
    Chunk chunk;
    ChunkDone done;
    // Sending: where in the chunk to start, as the receiver's credit
    // said (it holds the bytes before it in place, from a connection that
    // dropped half-way through the chunk).
    uint64_t from = 0;
  };

  // One outgoing connection, its hello answered (link_hello.cc).
  // `connect_ms` bounds the TCP connect, `hello_ms` the TLS handshake and
  // each answer of the hello.
  Result<std::shared_ptr<Conn>> Open(const std::string& address, uint32_t self_node,
                                     const Prover& prove, uint32_t connect_ms, uint32_t hello_ms,
                                     bool express);
  // Its reader and writer threads; an error when one cannot start (the
  // caller closes the connection: a thread that started ends with it).
  Status StartConn(const std::shared_ptr<Conn>& c);
  void Reader(Conn* c);
  void Writer(Conn* c);
  Status WriteJob(Conn& c, Job& job);
  Status ReceiveData(Conn& c, const FrameHeader& h);
  // The payload bytes [from, span) of chunk `key` into `target`, in
  // slices; how far they got in place when it fails.
  struct Landed {
    Status status;
    uint64_t upto = 0;
  };
  Landed ReceivePayload(Conn& c, const Key& key, std::byte* target, uint64_t from, uint64_t span);
  // ReceivePayload at the chunk's class value `nice`.
  Landed ReceiveAtClassNice(Conn& c, const Key& key, std::byte* target, uint64_t from,
                            uint64_t span, int nice);
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
  // Connections in a full set: the bulk ones and the express one (last).
  int SetSize() const { return options_.connections + 1; }
  // The live outgoing connection chunk `r` goes out on (out_ not empty).
  Conn& OutFor(const Request& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `r`'s DATA there.
  void SendLocked(Request r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A CREDIT / ACK of `key` over the incoming connection its chunk maps to
  // (in_ not empty).
  void AnswerOverInLocked(FrameType type, const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sending: `r` goes out on the live set when its credit came already,
  // else waits for it.
  void WaitForCreditLocked(const Key& key, Request r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailConn(Conn* c, const Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // ---- resume (peer_link_resume.cc) ----
  // The set `c` belongs to broke: close it and keep its requests (the
  // sending direction: every chunk not ACKed waits for a new credit).
  void SuspendLocked(Conn* c, const Status& why, std::vector<std::function<void()>>& calls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Credits again what is still posted and repeats recent ACKs, over the
  // peer's new set of connections.
  void RecreditLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers an ACK sent, for repeating after a drop.
  void NoteAckLocked(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The drop_* faults: shuts `c` down when `chunk` is the one named
  // (`option`), once per transfer; true when it did. Under mu_, so that
  // what the caller notes with it (an ACK) is in place before the peer can
  // see the drop and resume. The caller stalls (StallAfterDrop) once it
  // let go of mu_.
  bool MaybeDropLocked(Conn& c, const std::optional<uint64_t>& option, const Key& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StallAfterDrop() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reconnects the sending direction and watches both directions'
  // deadlines; one thread, started by the first drop.
  void Resumer() ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the resumer (the first Connect or drop); false when it cannot.
  bool StartResumerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Until a direction is down (true) or the link stops (false): meanwhile
  // checks the sending set for a stall every few ms and suspends it then.
  // `idle`: whether nothing was down when it began.
  bool WaitForTrouble(bool& idle) ABSL_LOCKS_EXCLUDED(mu_);
  // Why the sending set is stalled: chunks are on the wire and a
  // connection's kernel has heard no ACK through a retransmission timeout
  // (the path broke; TCP's back-off would wait past the outage's end).
  std::optional<Status> StalledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Since when (the later of `since` and the last time the peer was
  // heard) a direction waits.
  int64_t SilentMsLocked(std::chrono::steady_clock::time_point since) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the resume gives up: a direction with chunks waiting on it has
  // been down too long (peer_link_resume.cc). `idle_at`: the Resumer's
  // record of when each direction (out, in) was last down and idle.
  using IdleAt = std::array<std::optional<std::chrono::steady_clock::time_point>, 2>;
  std::optional<Status> GiveUpLocked(IdleAt& idle_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // receiving(), for a caller holding mu_.
  bool ReceivingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !in_.empty() || in_down_since_.has_value();
  }
  bool ResumingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return out_down_since_.has_value() || in_down_since_.has_value();
  }
  bool ResumerWakeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_resumer_ || ResumingLocked();
  }
  bool WatchWakeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ResumerWakeLocked() || !unacked_.empty();
  }
  // Opens a full set of outgoing connections and installs it, unless the
  // link failed (epoch) meanwhile (peer_link_hello.cc).
  Status OpenSet(const std::string& address, uint32_t self_node, const Prover& prove,
                 uint64_t epoch, uint32_t connect_ms, uint32_t hello_ms) ABSL_LOCKS_EXCLUDED(mu_);
  void FailLocked(const Status& why, std::vector<std::function<void()>>& calls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbandonLocked(uint64_t transfer, const Status& why,
                     std::vector<std::function<void()>>& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneDeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails `done` (on the completer) when `transfer` has ended or the link
  // lacks the connection the request needs; true when it did.
  bool RefusedLocked(uint64_t transfer, bool connected, const char* unconnected, ChunkDone& done)
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
  // Credits that came before the chunk: where to start in it.
  std::map<Key, uint64_t> credits_ ABSL_GUARDED_BY(mu_);
  // Receiving: posted chunks whose first bytes landed in place before
  // their connection dropped; the credit after the drop asks for the rest.
  std::map<Key, uint64_t> landed_part_ ABSL_GUARDED_BY(mu_);
  // Sending, checksums on: chunks sent, held until the receiver's ACK.
  std::map<Key, Request> unacked_ ABSL_GUARDED_BY(mu_);
  std::set<Key> resent_ ABSL_GUARDED_BY(mu_);        // sending: chunks sent twice
  std::set<Key> resend_asked_ ABSL_GUARDED_BY(mu_);  // receiving: chunks asked for again
  std::set<Key> corrupted_ ABSL_GUARDED_BY(mu_);     // fault injection, corrupt_once
  std::set<Key> dropped_ ABSL_GUARDED_BY(mu_);       // fault injection, drop_*
  std::map<uint64_t, std::pair<Status, std::chrono::steady_clock::time_point>> dead_
      ABSL_GUARDED_BY(mu_);
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t express_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t resumes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t readers_lifted_ ABSL_GUARDED_BY(mu_) = 0;
  LogLimiter lifted_log_{1, std::chrono::minutes(1)};
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Resume: where and how Connect() reached the peer last; since when each
  // direction waits for a new set; Fail() bumps the epoch, so a reconnect
  // begun before it is not installed after it.
  std::string address_ ABSL_GUARDED_BY(mu_);
  uint32_t self_node_ ABSL_GUARDED_BY(mu_) = 0;
  Prover prove_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::chrono::steady_clock::time_point> out_down_since_ ABSL_GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> in_down_since_ ABSL_GUARDED_BY(mu_);
  Status out_down_why_ ABSL_GUARDED_BY(mu_);
  Status in_down_why_ ABSL_GUARDED_BY(mu_);
  int fresh_in_ ABSL_GUARDED_BY(mu_) = 0;  // connections of the peer's new set so far
  // Receiving: ACKs sent in the last few timeouts, oldest first.
  std::deque<std::pair<std::chrono::steady_clock::time_point, Key>> acked_ ABSL_GUARDED_BY(mu_);
  std::multiset<Key> acked_keys_ ABSL_GUARDED_BY(mu_);  // what acked_ holds, to look up
  bool stop_resumer_ ABSL_GUARDED_BY(mu_) = false;
  std::thread resumer_;
  // Steady clock, ns: the last frame from the peer, or Heard().
  std::atomic<int64_t> last_heard_ns_{0};
};

}  // namespace isometry::net
