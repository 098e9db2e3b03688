#include "client/cpp/active_access.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/cpp/write_tracker.h"
#include "core/strings.h"
#include "isometry.pb.h"

namespace isometry::client {
namespace {

// Client page ranges sent with one checkpoint: the daemon takes 262144,
// but a local-socket frame holds 1 MiB, about 80000 ranges.
constexpr size_t kMaxClientRanges = 65536;

}  // namespace

AccessLog::~AccessLog() {
  munmap(map_, mapped_);
  ::close(event_fd_);
}

size_t AccessLog::Poll(const std::function<void(const active::LogEntry&, std::string_view)>& fn) {
  return reader_.Poll(fn);
}

void AccessLog::Ack() { reader_.Ack(); }

bool AccessLog::Wait(std::chrono::milliseconds timeout) {
  if (reader_.Pending()) return true;
  pollfd p{event_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) > 0) {
    uint64_t n;
    (void)!::read(event_fd_, &n, sizeof n);
  }
  return reader_.Pending();
}

Result<uint64_t> ActiveAccess::Watch(const Allocation& allocation, const WatchOptions& o) {
  v1::LocalRequest req;
  v1::WatchRequest* w = req.mutable_watch();
  w->set_allocation(allocation.id());
  w->set_offset(o.offset);
  w->set_bytes(o.bytes);
  w->set_action(static_cast<v1::WatchAction>(o.action));
  w->set_handler(static_cast<v1::WatchHandler>(o.handler));
  w->set_tag(o.tag);
  w->set_no_data(!o.log_data);
  w->set_value_bytes(o.value_bytes);
  w->set_file_memory(o.file_memory);
  w->set_file(o.file);
  w->set_log_bytes(o.log_bytes);
  w->set_full(static_cast<v1::LogFull>(o.full));
  std::vector<int> fds;
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, &fds));
  auto close_fds = [&fds] {
    for (int fd : fds) ::close(fd);
  };
  std::lock_guard lock(mu_);
  if (logs_.count(allocation.id()) != 0 || fds.size() != 2) {
    close_fds();  // the log is mapped already (or the daemon sent none)
    return resp.watch().region();
  }
  const uint64_t bytes = resp.watch().log_bytes();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  if (p == MAP_FAILED) {
    close_fds();
    return Internal("mmap of the access log: ", ErrnoString(errno));
  }
  ::close(fds[0]);
  auto reader = active::LogReader::Open(static_cast<std::byte*>(p), bytes);
  if (!reader.ok()) {
    munmap(p, bytes);
    ::close(fds[1]);
    return reader.status();
  }
  logs_[allocation.id()].reset(new AccessLog(static_cast<std::byte*>(p), bytes, fds[1], *reader));
  return resp.watch().region();
}

Status ActiveAccess::Unwatch(uint64_t allocation, uint64_t region) {
  v1::LocalRequest req;
  req.mutable_unwatch()->set_allocation(allocation);
  req.mutable_unwatch()->set_region(region);
  ISO_RETURN_IF_ERROR(client_.Request(req, nullptr).status());
  // The watch ends with its last region: so does the log.
  if (!Stats(allocation).ok()) {
    std::lock_guard lock(mu_);
    logs_.erase(allocation);
  }
  return OkStatus();
}

Status ActiveAccess::Flush(uint64_t allocation, std::chrono::milliseconds timeout) {
  v1::LocalRequest req;
  req.mutable_active_flush()->set_allocation(allocation);
  req.mutable_active_flush()->set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  return client_.Request(req, nullptr).status();
}

Result<WatchStats> ActiveAccess::Stats(uint64_t allocation) {
  v1::LocalRequest req;
  req.mutable_get_watch()->set_allocation(allocation);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, nullptr));
  const v1::WatchInfo& w = resp.get_watch();
  WatchStats s{w.log_bytes(), w.log_published(), w.log_acknowledged(), w.entries(), {}};
  for (const v1::WatchedRegion& r : w.regions()) {
    s.regions.push_back({r.region(), r.offset(), r.bytes(), r.puts(), r.gets(), r.bytes_accessed(),
                         r.denied(), r.inserts(), r.dirty_pages()});
  }
  return s;
}

Result<std::vector<uint64_t>> ActiveAccess::DirtyPages(uint64_t allocation, bool clear) {
  v1::LocalRequest req;
  req.mutable_dirty_pages()->set_allocation(allocation);
  req.mutable_dirty_pages()->set_clear(clear);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, nullptr));
  return std::vector<uint64_t>(resp.dirty_pages().pages().begin(),
                               resp.dirty_pages().pages().end());
}

Result<CheckpointStats> ActiveAccess::Checkpoint(uint64_t allocation, const std::string& memory,
                                                 const std::string& file,
                                                 const CheckpointOptions& options) {
  v1::LocalRequest req;
  v1::CheckpointRequest* c = req.mutable_checkpoint();
  c->set_allocation(allocation);
  c->set_memory(memory);
  c->set_file(file);
  c->set_full(options.full);
  c->set_compact(options.compact);
  Status tracked;
  if (options.tracker != nullptr) {
    // Collected (and re-protected) before the daemon copies the pages: a
    // store after this point is in this image or in the next list. A full
    // checkpoint collects too, to start the next list from it.
    auto pages = options.tracker->Collect();
    if (options.full) {
      tracked = pages.status();
    } else if (pages.ok() && pages->size() <= kMaxClientRanges) {
      for (const auto& [first, n] : *pages) {
        v1::PageRange* r = c->add_client_pages();
        r->set_first_page(first);
        r->set_pages(n);
      }
    } else {
      tracked = pages.ok() ? ResourceExhausted(pages->size(), " written ranges: more than ",
                                               kMaxClientRanges, " are sent as a full checkpoint")
                           : pages.status();
      c->clear_client_pages();
      c->set_full(true);
    }
  }
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, nullptr));
  const v1::CheckpointResponse& r = resp.checkpoint();
  CheckpointStats st{r.full(),       r.pages_written(), r.bytes_written(),
                     r.file_bytes(), r.deltas(),        r.delta_file_bytes(),
                     r.compacted(),  r.full_reason(),   tracked};
  return st;
}

Result<RestoreStats> ActiveAccess::Restore(uint64_t allocation, const std::string& memory,
                                           const std::string& file) {
  v1::LocalRequest req;
  v1::RestoreRequest* r = req.mutable_restore();
  r->set_allocation(allocation);
  r->set_memory(memory);
  r->set_file(file);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, nullptr));
  return RestoreStats{resp.restore().image_bytes(), resp.restore().deltas(),
                      resp.restore().pages_applied()};
}

Result<RestoreStats> ActiveAccess::Compact(const std::string& memory, const std::string& file) {
  v1::LocalRequest req;
  req.mutable_compact_checkpoint()->set_memory(memory);
  req.mutable_compact_checkpoint()->set_file(file);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, client_.Request(req, nullptr));
  return RestoreStats{0, resp.compact_checkpoint().deltas(),
                      resp.compact_checkpoint().pages_applied()};
}

AccessLog* ActiveAccess::Log(uint64_t allocation) {
  std::lock_guard lock(mu_);
  auto it = logs_.find(allocation);
  return it == logs_.end() ? nullptr : it->second.get();
}

}  // namespace isometry::client
