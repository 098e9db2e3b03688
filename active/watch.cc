#include "active/watch.h"

#include <algorithm>
#include <array>

#include "core/checked.h"

namespace isometry::active {
namespace {

constexpr std::array<std::string_view, 4> kActionNames = {"apply_log", "log_only", "apply_notify",
                                                          "deny"};
constexpr std::array<std::string_view, 5> kHandlerNames = {"client", "count", "file_log",
                                                           "hash_insert", "dirty_pages"};

}  // namespace

std::string_view ActionName(Action a) { return kActionNames.at(static_cast<size_t>(a)); }
std::string_view HandlerName(Handler h) { return kHandlerNames.at(static_cast<size_t>(h)); }

std::optional<Action> ParseAction(std::string_view name) {
  for (size_t i = 0; i < kActionNames.size(); ++i) {
    if (kActionNames[i] == name) return static_cast<Action>(i);
  }
  return std::nullopt;
}

std::optional<Handler> ParseHandler(std::string_view name) {
  for (size_t i = 0; i < kHandlerNames.size(); ++i) {
    if (kHandlerNames[i] == name) return static_cast<Handler>(i);
  }
  return std::nullopt;
}

Effect EffectOf(const Region& r, Op op) {
  Effect e;
  switch (r.action) {
    case Action::kDeny:
      e.deny = true;
      e.apply = false;
      break;
    case Action::kApplyLog:
      e.log = true;
      e.data = r.log_data;
      break;
    case Action::kLogOnly:
      e.apply = op == Op::kGet;  // a get changes nothing; it is served
      e.log = true;
      e.data = true;
      break;
    case Action::kApplyNotify:
      e.log = true;
      e.notify = true;
      break;
  }
  return e;
}

Result<uint64_t> RegionTable::Add(Region r, uint64_t allocation_bytes, const Limits& limits) {
  if (r.begin >= r.end) {
    return InvalidArgument("watched region [", r.begin, ", ", r.end, ") is empty");
  }
  if (r.end > allocation_bytes) {
    return InvalidArgument("watched region [", r.begin, ", ", r.end, ") ends past the allocation (",
                           allocation_bytes, " bytes)");
  }
  const uint64_t page = limits.page_size;
  if (r.begin % page != 0 || (r.end % page != 0 && r.end != allocation_bytes)) {
    return InvalidArgument("watched region [", r.begin, ", ", r.end,
                           ") must start and end on page boundaries (", page,
                           " bytes; the end may be the allocation's end)");
  }
  if (static_cast<size_t>(r.action) >= kActionNames.size() ||
      static_cast<size_t>(r.handler) >= kHandlerNames.size()) {
    return InvalidArgument("unknown action or handler");
  }
  if (r.handler == Handler::kHashInsert) {
    if (r.action != Action::kLogOnly) {
      return InvalidArgument(
          "handler hash_insert inserts the put's records itself: its action must be log_only");
    }
    if (r.value_bytes == 0 || r.value_bytes > 4096 || r.value_bytes % 8 != 0) {
      return InvalidArgument("hash_insert value_bytes must be a multiple of 8 in [8, 4096], not ",
                             r.value_bytes);
    }
    if (r.end - r.begin < 16 + uint64_t{r.value_bytes}) {
      return InvalidArgument("watched region [", r.begin, ", ", r.end, ") holds no hash_insert ",
                             "slot of ", 16 + uint64_t{r.value_bytes}, " bytes");
    }
  }
  if (r.handler == Handler::kDirtyPages && r.action != Action::kApplyLog &&
      r.action != Action::kApplyNotify) {
    return InvalidArgument(
        "handler dirty_pages tracks applied writes: action apply_log or "
        "apply_notify");
  }
  if (by_begin_.size() >= limits.max_regions) {
    return ResourceExhausted("allocation has ", by_begin_.size(), " watched regions; the limit is ",
                             limits.max_regions);
  }
  if (Touches(r.begin, r.end)) {
    return InvalidArgument("watched region [", r.begin, ", ", r.end,
                           ") overlaps a region already watched");
  }
  r.id = next_id_++;
  by_begin_[r.begin] = r;
  return r.id;
}

Status RegionTable::Remove(uint64_t id) {
  for (auto it = by_begin_.begin(); it != by_begin_.end(); ++it) {
    if (it->second.id == id) {
      by_begin_.erase(it);
      return OkStatus();
    }
  }
  return NotFound("no watched region ", id, " on this allocation");
}

const Region* RegionTable::Find(uint64_t id) const {
  for (const auto& [b, r] : by_begin_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

std::vector<Region> RegionTable::List() const {
  std::vector<Region> out;
  out.reserve(by_begin_.size());
  for (const auto& [b, r] : by_begin_) out.push_back(r);
  return out;
}

bool RegionTable::Touches(uint64_t begin, uint64_t end) const {
  if (begin >= end) return false;
  auto it = by_begin_.lower_bound(end);  // first region starting at or after end
  if (it == by_begin_.begin()) return false;
  --it;  // the last region starting before end
  return it->second.end > begin;
}

std::vector<Piece> RegionTable::Split(uint64_t begin, uint64_t end) const {
  std::vector<Piece> out;
  if (begin >= end) return out;
  auto it = by_begin_.upper_bound(begin);
  if (it != by_begin_.begin() && std::prev(it)->second.end > begin) --it;
  uint64_t at = begin;
  for (; it != by_begin_.end() && it->second.begin < end; ++it) {
    const Region& r = it->second;
    if (r.begin > at) out.push_back({at, r.begin, nullptr});
    const uint64_t b = std::max(at, r.begin);
    const uint64_t e = std::min(end, r.end);
    out.push_back({b, e, &r});
    at = e;
  }
  if (at < end) out.push_back({at, end, nullptr});
  return out;
}

std::vector<Piece> RegionTable::SplitAll(
    const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const {
  std::vector<Piece> out;
  for (const auto& [b, e] : ranges) {
    for (const Piece& p : Split(b, e)) {
      if (!out.empty() && !p.region && !out.back().region && out.back().end == p.begin) {
        out.back().end = p.end;
      } else {
        out.push_back(p);
      }
    }
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> MergeRanges(
    std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [b, e] : ranges) {
    if (b >= e) continue;
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(b, e);
    }
  }
  return out;
}

}  // namespace isometry::active
