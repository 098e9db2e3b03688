// Looking up a group by name or id, and a user by id, without getgrnam's /
// getgrgid's / getpwuid's shared static buffer (the daemon's threads may
// look up at the same time).
#pragma once

#include <grp.h>
#include <pwd.h>
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

// The name of user `uid`, or nullopt when there is no such user (or the
// lookup failed).
inline std::optional<std::string> UserNameOf(uid_t uid) {
  std::vector<char> buf(16384);
  passwd p{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &p, buf.data(), buf.size(), &found) != 0 || !found) return std::nullopt;
  return std::string(found->pw_name);
}

}  // namespace isometry
