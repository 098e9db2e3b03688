#include "procmem/proc_maps.h"

#include <charconv>

#include "core/log_escape.h"
#include "core/strings.h"

namespace isometry {

namespace {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  bool readable = false;
  bool writable = false;
};

bool ParseHex(std::string_view text, uint64_t& out) {
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return ec == std::errc() && p == text.data() + text.size();
}

// "start-end perms offset dev inode [path]"; false when malformed.
bool ParseLine(std::string_view line, Mapping& m) {
  const size_t dash = line.find('-');
  const size_t space = line.find(' ');
  if (dash == std::string_view::npos || space == std::string_view::npos || dash > space ||
      line.size() < space + 5) {
    return false;
  }
  if (!ParseHex(line.substr(0, dash), m.start) ||
      !ParseHex(line.substr(dash + 1, space - dash - 1), m.end) || m.end <= m.start) {
    return false;
  }
  const std::string_view perms = line.substr(space + 1, 4);
  m.readable = perms[0] == 'r';
  m.writable = perms[1] == 'w';
  return true;
}

}  // namespace

Result<RangeProtection> ProtectionOf(std::string_view maps, uint64_t address, uint64_t bytes) {
  RangeProtection out;
  out.writable = true;
  const uint64_t end = address + bytes;  // the caller checked that it does not wrap
  uint64_t covered = address;            // every byte below it is mapped readable
  while (!maps.empty() && covered < end) {
    const size_t nl = maps.find('\n');
    const std::string_view line = maps.substr(0, nl);
    maps = nl == std::string_view::npos ? std::string_view() : maps.substr(nl + 1);
    if (line.empty()) continue;
    Mapping m;
    if (!ParseLine(line, m)) {
      return InvalidArgument("private range: unreadable line in the process's maps: '",
                             ForLog(line, 256), "'");
    }
    if (m.end <= covered) continue;
    if (m.start > covered) break;  // a hole at `covered`
    if (!m.readable) {
      return InvalidArgument("private range [", HexAddress(address), ", +", bytes,
                             ") takes in no-access pages of the process: ", ForLog(line, 256));
    }
    if (!m.writable && out.writable) {
      out.writable = false;
      out.first_read_only = std::string(line);
    }
    covered = m.end;
  }
  if (covered < end) {
    return InvalidArgument("private range [", HexAddress(address), ", +", bytes,
                           ") is not all mapped in the process: nothing at ", HexAddress(covered));
  }
  return out;
}

}  // namespace isometry
