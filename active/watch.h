// Watched regions (Active Access, seed 004): page-granular ranges of one
// pool allocation whose puts and gets run a handler and act as their
// region's action says.
//
// Pure logic, no I/O: the table of one allocation's regions, the split of
// a byte range at region boundaries, and what each action does to a put or
// a get. The daemon (daemon/node/watch_state.h) owns the tables and the
// access logs; clients never see this header's types.
//
// Thread-safety: none; the owner of a RegionTable serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace isometry::active {

// What an access to a watched region does (the seed's W/WL/WLD bits).
enum class Action : uint8_t {
  kApplyLog = 0,     // the memory effect happens; an entry (data if asked) is logged
  kLogOnly = 1,      // puts are not applied, their data goes only to the log;
                     // gets are served (reading changes nothing) and logged with data
  kApplyNotify = 2,  // the memory effect happens; a metadata-only entry wakes the handler
  kDeny = 3,         // the copy fails before any byte of it moves; nothing is logged
};

// Who handles a region's entries: the owning client (through its access
// log ring) or one built into the daemon, which handles entries as the
// copy completes.
enum class Handler : uint8_t {
  kClient = 0,      // entries go to the allocation's access log ring
  kCount = 1,       // per-region counters of puts, gets and bytes
  kFileLog = 2,     // entries (and data) appended to a file of a DSK memory
  kHashInsert = 3,  // put data = (key, value) records inserted into a hashtable
                    // laid out in the region (action must be kLogOnly)
  kDirtyPages = 4,  // pages written are marked for incremental checkpoints
};

enum class Op : uint8_t { kPut = 1, kGet = 2 };

std::string_view ActionName(Action a);
std::string_view HandlerName(Handler h);
std::optional<Action> ParseAction(std::string_view name);
std::optional<Handler> ParseHandler(std::string_view name);

struct Region {
  uint64_t id = 0;
  uint64_t begin = 0;  // bytes into the allocation, page aligned
  uint64_t end = 0;    // exclusive; page aligned or the allocation's end
  Action action = Action::kApplyLog;
  Handler handler = Handler::kClient;
  uint64_t tag = 0;      // the owner's own handler id, echoed in entries
  bool log_data = true;  // kApplyLog: entries carry the bytes
  // kHashInsert: bytes of a value (a slot is 16 + value_bytes).
  uint32_t value_bytes = 8;
};

// What one access to a region does.
struct Effect {
  bool deny = false;
  bool apply = true;  // the memory effect (puts: write; gets: always read)
  bool log = false;   // an entry is produced for the handler
  bool data = false;  // the entry carries the bytes
  bool notify = false;
};
Effect EffectOf(const Region& r, Op op);

struct Limits {
  uint64_t page_size = 4096;
  uint32_t max_regions = 64;  // of one allocation
};

// A piece of an accessed range: [begin, end) inside one region or none.
struct Piece {
  uint64_t begin = 0;
  uint64_t end = 0;
  const Region* region = nullptr;  // null: not watched
};

class RegionTable {
 public:
  // Adds `r` (its id is assigned here) to an allocation of
  // `allocation_bytes`. INVALID_ARGUMENT: empty, unaligned (begin and end
  // on page boundaries; end may be the allocation's end), past the
  // allocation, overlapping another region, a handler that does not fit
  // its action; RESOURCE_EXHAUSTED past limits.max_regions.
  Result<uint64_t> Add(Region r, uint64_t allocation_bytes, const Limits& limits);
  // NOT_FOUND for an unknown id.
  Status Remove(uint64_t id);
  const Region* Find(uint64_t id) const;
  bool empty() const { return by_begin_.empty(); }
  size_t size() const { return by_begin_.size(); }
  std::vector<Region> List() const;

  // Whether any region overlaps [begin, end).
  bool Touches(uint64_t begin, uint64_t end) const;
  // [begin, end) cut at region boundaries, in order; pieces outside every
  // region have region == nullptr. Adjacent unwatched pieces are merged.
  std::vector<Piece> Split(uint64_t begin, uint64_t end) const;
  // Split of every range of `ranges` (sorted, disjoint), concatenated.
  std::vector<Piece> SplitAll(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const;

 private:
  std::map<uint64_t, Region> by_begin_;
  uint64_t next_id_ = 1;
};

// Sorts and merges byte ranges (touching ranges join).
std::vector<std::pair<uint64_t, uint64_t>> MergeRanges(
    std::vector<std::pair<uint64_t, uint64_t>> ranges);

}  // namespace isometry::active
