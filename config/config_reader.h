// The config file's reader: typed values of TOML nodes, each error naming
// the file, line and key (config_parser.cc and the section parsers).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "config/config_parser.h"
#include "core/status.h"
#include "core/strings.h"

namespace isometry {

// Error with the file, line and key of a node.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}
  std::string_view source() const { return source_; }

  Status Error(const toml::node& node, std::string_view key, std::string_view problem) const {
    return InvalidArgument(source_, ":", node.source().begin.line, ": key '", key, "': ", problem);
  }

  // Rejects keys of `table` outside `allowed`.
  Status OnlyKeys(const toml::table& table, std::string_view prefix,
                  std::initializer_list<std::string_view> allowed) const {
    return OnlyKeys(table, prefix,
                    std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  Status OnlyKeys(const toml::table& table, std::string_view prefix,
                  std::span<const std::string_view> allowed) const {
    for (const auto& [k, v] : table) {
      bool ok = false;
      for (std::string_view a : allowed) {
        ok |= (k.str() == a);
      }
      if (!ok) {
        std::string list;
        for (std::string_view a : allowed) {
          StrAppend(&list, list.empty() ? "" : ", ", a);
        }
        return Error(v, StrCat(prefix, k.str()), StrCat("unknown key (known here: ", list, ")"));
      }
    }
    return OkStatus();
  }

  Result<std::string> String(const toml::node& n, std::string_view key) const {
    if (auto s = n.value<std::string>()) {
      return *s;
    }
    return Error(n, key, "must be a string");
  }

  Result<bool> Bool(const toml::node& n, std::string_view key) const {
    if (auto b = n.value<bool>(); b && n.is_boolean()) {
      return *b;
    }
    return Error(n, key, "must be true or false");
  }

  Result<int64_t> Integer(const toml::node& n, std::string_view key, int64_t lo, int64_t hi) const {
    // Type first: toml++ casts floats (4e96) to integers, undefined out of range.
    const std::optional<int64_t> v = n.is_integer() ? n.value<int64_t>() : std::nullopt;
    if (!v) {
      return Error(n, key, "must be an integer");
    }
    if (*v < lo || *v > hi) {
      return Error(n, key, StrCat("is ", *v, "; it must be between ", lo, " and ", hi));
    }
    return *v;
  }

  Result<uint64_t> Size(const toml::node& n, std::string_view key) const {
    if (n.is_integer()) {
      const int64_t v = *n.value<int64_t>();
      if (v < 0) {
        return Error(n, key, "must not be negative");
      }
      return static_cast<uint64_t>(v);
    }
    if (auto s = n.value<std::string>()) {
      auto r = ParseByteSize(*s);
      if (!r.ok()) {
        return Error(n, key, std::string(r.status().message()));
      }
      return *r;
    }
    return Error(n, key, "must be a size like 4096 or \"32MiB\"");
  }

 private:
  std::string source_;
};

}  // namespace isometry
