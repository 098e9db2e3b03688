// What a process's /proc/<pid>/maps says of one range of its address
// space: whether every byte of it is mapped readable, and whether it is
// all writable.
//
// Why the daemon asks: it reaches a client's private memory through
// /proc/<pid>/mem, which writes past page protections (as a debugger sets
// a breakpoint in read-only code). A range the client registers is
// therefore checked against its mappings once, at registration: no-access
// pages and holes are refused, and a range that is not all writable may
// only be read (copies into it are refused, naming the pages).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace isometry {

struct RangeProtection {
  bool writable = false;  // every page of it is mapped with 'w'
  // The first mapping that is not writable, as maps shows it ("7f..-7f..
  // r-xp ... /usr/bin/python3"): for the message that refuses a write.
  std::string first_read_only;
};

// Walks `maps` (the text of /proc/<pid>/maps, its lines sorted by
// address, as the kernel writes them) over [address, address + bytes).
// INVALID_ARGUMENT naming the first hole or no-access (not readable)
// mapping in the range, or a malformed line that covers it.
Result<RangeProtection> ProtectionOf(std::string_view maps, uint64_t address, uint64_t bytes);

}  // namespace isometry
