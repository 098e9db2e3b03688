#include "daemon/node/watch_reader.h"

#include <algorithm>
#include <utility>

#include "core/strings.h"

namespace isometry {

WatchReader::~WatchReader() { watch_->EndRead(id_, false); }

bool WatchState::HandOutLog() {
  absl::MutexLock lock(&reader_mu_);
  if (consumer_ == Consumer::kReader) return false;
  consumer_ = Consumer::kMapped;  // for good: the memfd is out there
  return true;
}

bool WatchState::ReadByDaemon() const {
  absl::MutexLock lock(&reader_mu_);
  return consumer_ == Consumer::kReader;
}

Result<std::unique_ptr<WatchReader>> WatchState::OpenReader() {
  absl::MutexLock lock(&reader_mu_);
  if (consumer_ == Consumer::kMapped) {
    return FailedPrecondition(
        "allocation ", allocation_, "'s access log was handed to this session's local-socket ",
        "client (Watch over the local socket), which reads it from its mapping; the daemon ",
        "does not read a ring a client can write");
  }
  if (consumer_ == Consumer::kReader) {
    return absl::AlreadyExistsError(
        StrCat("allocation ", allocation_, "'s access log is already read by a ReadAccessLog ",
               "stream (one reader per log): cancel that stream first"));
  }
  Result<active::LogReader> r = active::LogReader::Open(log_.data(), log_.size());
  if (!r.ok()) return r.status();
  log_reader_ = *r;
  consumer_ = Consumer::kReader;
  reader_id_ = ++last_reader_id_;
  return std::make_unique<WatchReader>(shared_from_this(), reader_id_);
}

namespace {

// `e` (and its data) as pieces of at most WatchReader::kPieceBytes.
void AddPieces(const active::LogEntry& e, std::string_view data, std::vector<LoggedAccess>& out) {
  if (data.size() <= WatchReader::kPieceBytes) {
    out.push_back({e, std::string(data)});
    return;
  }
  for (uint64_t at = 0; at < data.size(); at += WatchReader::kPieceBytes) {
    const uint64_t n = std::min<uint64_t>(WatchReader::kPieceBytes, data.size() - at);
    LoggedAccess piece{e, std::string(data.substr(at, n))};
    piece.entry.offset = e.offset + at;
    piece.entry.size = n;
    piece.entry.data_bytes = n;
    out.push_back(std::move(piece));
  }
}

}  // namespace

void WatchState::ReadNext(uint64_t id, uint64_t max_bytes, LogBatchReady ready) {
  Result<std::vector<LoggedAccess>> answer = std::vector<LoggedAccess>();
  {
    absl::MutexLock lock(&reader_mu_);
    if (id != reader_id_) {
      answer = absl::CancelledError(
          StrCat("the reader of allocation ", allocation_, "'s access log was cancelled"));
    } else {
      // Padding alone hands out nothing: that waits, as no entry does.
      const size_t n = log_reader_->Poll(
          [&](const active::LogEntry& e, std::string_view data) { AddPieces(e, data, *answer); },
          max_bytes);
      if (n == 0 && !worker_exited_) {
        // Published entries or the worker's exit answer it (NotifyReader):
        // both take reader_mu_ after the tail moved, so none is missed.
        reader_waiting_ = std::move(ready);
        reader_max_bytes_ = max_bytes;
        return;
      }
    }
  }
  ready(std::move(answer));  // entries, or none: the watch ended and all were read
}

void WatchState::AckRead(uint64_t id) {
  absl::MutexLock lock(&reader_mu_);
  if (id == reader_id_) log_reader_->Ack();
}

void WatchState::EndRead(uint64_t id, bool answer) {
  LogBatchReady waiting;
  {
    absl::MutexLock lock(&reader_mu_);
    if (id != reader_id_) return;
    reader_id_ = 0;
    consumer_ = Consumer::kNone;
    log_reader_.reset();
    waiting = std::exchange(reader_waiting_, nullptr);
  }
  if (waiting && answer) {
    waiting(absl::CancelledError(
        StrCat("the reader of allocation ", allocation_, "'s access log was cancelled")));
  }
}

void WatchState::NotifyReader() {
  LogBatchReady waiting;
  uint64_t id = 0, max_bytes = 0;
  {
    absl::MutexLock lock(&reader_mu_);
    if (!reader_waiting_) return;
    waiting = std::exchange(reader_waiting_, nullptr);
    id = reader_id_;
    max_bytes = reader_max_bytes_;
  }
  ReadNext(id, max_bytes, std::move(waiting));
}

}  // namespace isometry
