// Writing and reading an access log ring (log_abi.h) laid over memory the
// caller owns: the daemon writes with LogWriter into the memfd it maps,
// the client reads with LogReader from its mapping. Pure: no fds, no
// waiting; the callers decide what to do when the log is full.
//
// Thread-safety: one writer and one reader per log, each used by one
// thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "active/log_abi.h"
#include "core/status.h"

namespace isometry::active {

// Bytes a ring of `capacity` needs (header included).
uint64_t LogBytes(uint64_t capacity);
// The largest data one record may carry: bigger accesses are logged as
// several entries, each at most this much data.
uint64_t MaxRecordData(uint64_t capacity);

class LogWriter {
 public:
  // Lays a fresh header over `base` (LogBytes(capacity) bytes, capacity a
  // power of two >= 4096).
  LogWriter(std::byte* base, uint64_t capacity, uint64_t allocation);

  // Appends one entry (seq assigned here) with `data` (may be empty;
  // entry.data_bytes is set from it), unless the log lacks room: then
  // returns false and writes nothing. Not visible to the reader until
  // Publish().
  bool TryAppend(LogEntry entry, std::string_view data);
  // Makes appended entries visible (stores tail).
  void Publish();
  // The reader's acknowledged position, checked: a value outside
  // [published - capacity, published] reads as no progress.
  uint64_t Acknowledged() const;
  uint64_t published() const { return published_; }
  // Bytes free for records now (the reader's acknowledgements included).
  uint64_t Room() const { return Free(); }
  uint64_t next_seq() const { return seq_ + 1; }
  uint64_t capacity() const { return capacity_; }

 private:
  uint64_t Free() const;
  LogHeader* header_;
  std::byte* data_;
  uint64_t capacity_;
  uint64_t tail_ = 0;       // appended
  uint64_t published_ = 0;  // stored in the header
  mutable uint64_t last_ack_ = 0;
  uint64_t seq_ = 0;
};

class LogReader {
 public:
  // Over a mapping of a log the daemon made; INVALID_ARGUMENT when the
  // header does not describe a log that fits `bytes`.
  static Result<LogReader> Open(std::byte* base, uint64_t bytes);

  // Calls `fn` for each published entry not yet consumed (data follows the
  // entry in the ring) and returns how many; does not acknowledge. With
  // `max_bytes`, stops once the records handed out reach it (at least one
  // record is handed out when any is published).
  size_t Poll(const std::function<void(const LogEntry&, std::string_view data)>& fn,
              uint64_t max_bytes = UINT64_MAX);
  // Acknowledges every entry Poll has handed out (stores head).
  void Ack();
  bool Pending() const;

 private:
  LogReader(LogHeader* h, std::byte* data) : header_(h), data_(data) {}
  LogHeader* header_;
  std::byte* data_;
  uint64_t head_ = 0;  // consumed (handed out)
};

}  // namespace isometry::active
