// Where each key of a configuration file was written, so that every
// rejection, from parsing to the checks made at start, reads
// "FILE:LINE: key 'memory.client_quota': problem".
//
// Checks that know only the typed structs (RuntimeConfig::Validate, the
// daemon's start checks) raise ConfigKeyError with the key's indexed path
// ("memory[1].client_quota"); ConfigOrigin::Locate, which knows the file,
// turns that path into FILE:LINE. Without an origin (library users who
// build a RuntimeConfig in code) the message stands alone:
// "config: key 'memory.client_quota': ...".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace isometry {

// The payload type of a config key error (the indexed path).
inline constexpr char kConfigKeyPayload[] = "type.isometry/config-key";

Status MakeConfigKeyError(std::string_view key_path, std::string_view problem);

// An InvalidArgument about `key_path`, e.g. ConfigKeyError("memory[0].kind",
// "memory 'fb0' has kind FBM; ...").
template <typename... Args>
Status ConfigKeyError(std::string_view key_path, const Args&... args) {
  return MakeConfigKeyError(key_path, StrCat(args...));
}

// The indexed key path a ConfigKeyError names, if `s` is one.
std::optional<std::string> ConfigKeyOf(const Status& s);

struct ConfigOrigin {
  std::string source = "<config>";   // the file as named, or "<embedded default>"
  std::map<std::string, int> lines;  // indexed key path -> line (1-based)

  // The line of `key_path`, or of its nearest written parent ("memory[1]"
  // for an absent "memory[1].pool"); 1 when nothing of it was written.
  int LineOf(std::string_view key_path) const;
  // A config key error as "SOURCE:LINE: key 'K': problem"; any other error
  // as "SOURCE: message". OK stays OK.
  Status Locate(const Status& s) const;
};

}  // namespace isometry
