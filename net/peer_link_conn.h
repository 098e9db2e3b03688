// Internal to net/: one data connection of a PeerLink and the
// frames queued on it. Shared by the link's files (peer_link.cc,
// peer_link_hello.cc, peer_link_checksum.cc); not a public interface.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/fair_queue.h"
#include "net/peer_link.h"

namespace isometry::net {

struct PeerLink::Job {
  FrameHeader header;
  std::string control;          // HELLO / ABORT payload
  std::optional<Request> data;  // DATA: what to send

  // DATA of one chunk.
  static Job Data(Request r) {
    Job j;
    j.header.type = FrameType::kData;
    j.data = std::move(r);
    return j;
  }
  // CREDIT, ACK or RESEND of one chunk.
  static Job Answer(FrameType type, const Key& key) {
    Job j;
    j.header.type = type;
    j.header.transfer = key.first;
    j.header.chunk = key.second;
    return j;
  }
};

inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

struct PeerLink::Conn {
  std::unique_ptr<Wire> wire;
  bool outgoing = false;
  bool checksum = false;  // what its hello settled
  bool express = false;   // the set's express connection (peer_link.h)
  absl::Mutex mu;
  // Control frames go first, in the order queued; then DATA, shared
  // between QoS classes by weight and by priority within a class
  // (core/fair_queue.h).
  std::deque<Job> control ABSL_GUARDED_BY(mu);
  FairQueue<Job> data ABSL_GUARDED_BY(mu);
  bool closing ABSL_GUARDED_BY(mu) = false;
  std::thread reader, writer;
  std::vector<std::byte> send_bounce, recv_bounce;  // owned by the writer / reader thread
  // When the reader last got a frame (steady clock, ns): a set that heard
  // nothing through an outage is re-opened once the peer answers again.
  std::atomic<int64_t> last_frame_ns{0};
  // The reader's thread, and since when (steady clock, ns; 0: not) it
  // receives a chunk's bytes at a class's lowered value
  // (PeerLink::LiftStarvedReaders).
  std::atomic<pid_t> reader_tid{0};
  std::atomic<int64_t> lowered_since_ns{0};

  ~Conn() {
    if (reader.joinable()) reader.join();
    if (writer.joinable()) writer.join();
  }
  bool WriterHasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return closing || !control.empty() || !data.empty();
  }
  // Wakes both threads for good: they exit, the destructor joins them.
  // Queued DATA fails with `why`, or goes to `leftover` with the control
  // frames when `keep_data` (a dropped set's chunks are sent again).
  void Close(std::vector<std::function<void()>>& calls, const Status& why,
             std::deque<Job>* leftover = nullptr, bool keep_data = false) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    if (!closing) wire->Shutdown();
    closing = true;
    if (leftover) {
      for (Job& j : control) leftover->push_back(std::move(j));
    }
    control.clear();
    data.Drain([&](Job&& j) {
      if (keep_data && leftover) {
        leftover->push_back(std::move(j));
      } else {
        calls.push_back([d = std::move(j.data->done), why] { d(why); });
      }
    });
  }
  bool Closing() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    return closing;
  }
};

}  // namespace isometry::net
