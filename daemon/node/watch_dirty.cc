// A watch's dirty pages (kDirtyPages regions) and what an incremental
// checkpoint may rely on (docs/guides/active-access.md, "Incremental checkpoints"): the dirty set
// holds every write into the allocation since one checkpoint only while
// dirty_pages regions cover the whole allocation (every write then passes
// through them or is noted by NoteWrite), no clear dropped pages and no
// region came or went. Otherwise TakeDirty says why and the checkpoint is
// full.
#include <algorithm>
#include <utility>

#include "core/strings.h"
#include "daemon/node/watch_state.h"

namespace isometry {

std::vector<uint64_t> WatchState::DirtyPages(bool clear) {
  std::vector<uint64_t> out;
  const uint64_t page = options_.limits.page_size;
  absl::MutexLock lock(&mu_);
  for (auto& [id, rs] : regions_) {
    for (size_t i = 0; i < rs.dirty.size(); ++i) {
      if (rs.dirty[i]) out.push_back(rs.stats.region.begin / page + i);
    }
    if (clear) {
      rs.dirty.assign(rs.dirty.size(), false);
      rs.stats.dirty_pages = 0;
    }
  }
  // Pages dropped by a clear are in no checkpoint's record.
  if (clear && !out.empty()) {
    ForgetDirtyBaseLocked(
        StrCat("a DirtyPages clear dropped ", out.size(), " dirty pages after it"));
  }
  return out;
}

void WatchState::MarkDirty(const std::vector<uint64_t>& pages) {
  const uint64_t page = options_.limits.page_size;
  absl::MutexLock lock(&mu_);
  for (auto& [id, rs] : regions_) {
    const uint64_t first = rs.stats.region.begin / page;
    for (uint64_t p : pages) {
      if (p < first || p - first >= rs.dirty.size()) continue;
      if (!rs.dirty[p - first]) ++rs.stats.dirty_pages;
      rs.dirty[p - first] = true;
    }
  }
}

void WatchState::NoteWrite(uint64_t offset, uint64_t length) {
  if (length == 0) return;
  const uint64_t page = options_.limits.page_size;
  const uint64_t end = offset + length;  // inside the allocation: the caller checked
  absl::MutexLock lock(&mu_);
  for (auto& [id, rs] : regions_) {
    const active::Region& r = rs.stats.region;
    if (rs.dirty.empty() || end <= r.begin || r.end <= offset) continue;
    const uint64_t from = (std::max(offset, r.begin) - r.begin) / page;
    const uint64_t to = (std::min(end, r.end) - r.begin + page - 1) / page;
    for (uint64_t p = from; p < to && p < rs.dirty.size(); ++p) {
      if (!rs.dirty[p]) ++rs.stats.dirty_pages;
      rs.dirty[p] = true;
    }
  }
}

WatchState::DirtyTake WatchState::TakeDirty() {
  DirtyTake t;
  const uint64_t page = options_.limits.page_size;
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  absl::MutexLock lock(&mu_);
  for (auto& [id, rs] : regions_) {
    if (rs.stats.region.handler != active::Handler::kDirtyPages) continue;
    covered.emplace_back(rs.stats.region.begin, rs.stats.region.end);
    for (size_t i = 0; i < rs.dirty.size(); ++i) {
      if (rs.dirty[i]) t.pages.push_back(rs.stats.region.begin / page + i);
    }
    rs.dirty.assign(rs.dirty.size(), false);
    rs.stats.dirty_pages = 0;
  }
  std::sort(covered.begin(), covered.end());
  uint64_t at = 0;  // the allocation is covered up to here
  for (const auto& [begin, end] : covered) {
    if (begin > at) break;
    at = std::max(at, end);
  }
  if (at < bytes_) {
    const auto next =
        std::find_if(covered.begin(), covered.end(), [at](const auto& r) { return r.first > at; });
    const uint64_t gap_end = next == covered.end() ? bytes_ : next->first;
    t.untracked = StrCat("bytes [", at, ", ", gap_end, ") of allocation ", allocation_,
                         " lie in no dirty_pages region: the daemon does not track writes there");
  }
  t.since = dirty_since_;
  t.generation = dirty_since_generation_;
  // Until the checkpoint ends (CountFrom), the set lacks the pages it
  // took: a checkpoint into other files meanwhile must not rely on it.
  t.since_why = dirty_why_;
  ForgetDirtyBaseLocked("another checkpoint of the allocation was running or failed");
  t.epoch = dirty_epoch_;
  return t;
}

void WatchState::CountFrom(uint64_t epoch, std::string files, uint64_t generation,
                           std::string why) {
  absl::MutexLock lock(&mu_);
  if (epoch != dirty_epoch_) return;
  dirty_since_ = std::move(files);
  dirty_since_generation_ = generation;
  dirty_why_ = std::move(why);
}

void WatchState::ForgetDirtyBaseLocked(std::string why) {
  dirty_since_.clear();
  dirty_since_generation_ = 0;
  dirty_why_ = std::move(why);
  ++dirty_epoch_;
}

}  // namespace isometry
