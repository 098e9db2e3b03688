// Looking up a group by name or id without getgrnam's / getgrgid's shared
// static buffer (the daemon's threads may look up at the same time).
#pragma once

#include <grp.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace isometry {

// The id of group `name`, or nullopt when there is no such group (or the
// lookup failed).
inline std::optional<gid_t> GroupIdOf(const std::string& name) {
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || !found) {
    return std::nullopt;
  }
  return found->gr_gid;
}

// The name of group `gid`, or nullopt when there is no such group (or the
// lookup failed).
inline std::optional<std::string> GroupNameOf(gid_t gid) {
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  if (getgrgid_r(gid, &g, buf.data(), buf.size(), &found) != 0 || !found) {
    return std::nullopt;
  }
  return std::string(found->gr_name);
}

}  // namespace isometry
