#include "config/config_origin.h"

#include <absl/strings/cord.h>

namespace isometry {

namespace {

constexpr std::string_view kPrefix = "config: ";

// "memory[1].edges[0]" -> "memory.edges": the key as a user reads it.
std::string Unindexed(std::string_view path) {
  std::string out;
  bool in_index = false;
  for (char c : path) {
    if (c == '[') {
      in_index = true;
    }
    if (!in_index) {
      out.push_back(c);
    }
    if (c == ']') {
      in_index = false;
    }
  }
  return out;
}

// The parent of an indexed path: "a[1].b" -> "a[1]" -> "a" -> "".
std::string_view ParentOf(std::string_view path) {
  const size_t cut = path.find_last_of(".[");
  return cut == std::string_view::npos ? std::string_view() : path.substr(0, cut);
}

}  // namespace

Status MakeConfigKeyError(std::string_view key_path, std::string_view problem) {
  Status s = InvalidArgument(kPrefix, "key '", Unindexed(key_path), "': ", problem);
  s.SetPayload(kConfigKeyPayload, absl::Cord(std::string(key_path)));
  return s;
}

std::optional<std::string> ConfigKeyOf(const Status& s) {
  auto payload = s.GetPayload(kConfigKeyPayload);
  if (!payload) {
    return std::nullopt;
  }
  return std::string(*payload);
}

int ConfigOrigin::LineOf(std::string_view key_path) const {
  for (std::string_view p = key_path; !p.empty(); p = ParentOf(p)) {
    auto it = lines.find(std::string(p));
    if (it != lines.end() && it->second > 0) {
      return it->second;
    }
  }
  return 1;
}

Status ConfigOrigin::Locate(const Status& s) const {
  if (s.ok()) {
    return s;
  }
  std::string_view msg(s.message().data(), s.message().size());
  const std::optional<std::string> key = ConfigKeyOf(s);
  if (!key) {
    return Status(s.code(), StrCat(source, ": ", msg));
  }
  if (msg.substr(0, kPrefix.size()) == kPrefix) {
    msg.remove_prefix(kPrefix.size());
  }
  Status located(s.code(), StrCat(source, ":", LineOf(*key), ": ", msg));
  located.SetPayload(kConfigKeyPayload, absl::Cord(*key));
  return located;
}

}  // namespace isometry
