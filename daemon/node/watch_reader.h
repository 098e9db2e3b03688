// The daemon-side reader of a watch's access log (ReadAccessLog): it
// drains the ring the daemon maps, so a client without the local socket
// (gRPC only) serves the HANDLER_CLIENT handler, and copies held by a full
// log go on as it reads.
//
// A WatchReader is the watch's one consumer while it lives (see
// WatchState: never beside a client's mapping, never two); destroying it
// frees the slot, and a later reader starts at the first entry not
// acknowledged.
//
// Thread-safety: one Next outstanding at a time; Next, Ack and Cancel
// may be called from any thread. `ready` runs on the caller's thread or
// the watch's worker, never under a lock, exactly once per Next.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/node/watch_state.h"

namespace isometry {

class WatchReader {
 public:
  // Data one Next hands out at most (one larger entry is handed alone).
  static constexpr uint64_t kBatchBytes = uint64_t{1} << 20;
  // Entries with more data are cut into pieces of this much, each with
  // the entry's seq and its own offset and size.
  static constexpr uint64_t kPieceBytes = uint64_t{16} << 20;

  WatchReader(std::shared_ptr<WatchState> watch, uint64_t id) : watch_(std::move(watch)), id_(id) {}
  ~WatchReader();
  WatchReader(const WatchReader&) = delete;
  WatchReader& operator=(const WatchReader&) = delete;

  // Calls `ready` with the next entries once some are published; with
  // none once the watch has ended and every entry was handed out; with
  // CANCELLED after Cancel. Entries are not acknowledged until Ack.
  void Next(LogBatchReady ready) { watch_->ReadNext(id_, kBatchBytes, std::move(ready)); }
  // Acknowledges what Next handed out so far (the caller has sent it).
  void Ack() { watch_->AckRead(id_); }
  // Frees the reader slot now; a waiting Next is answered CANCELLED.
  void Cancel() { watch_->EndRead(id_, true); }
  uint64_t allocation() const { return watch_->allocation(); }

 private:
  const std::shared_ptr<WatchState> watch_;
  const uint64_t id_;
};

}  // namespace isometry
