#include "config/etcd_config_parser.h"

#include "core/strings.h"

namespace isometry {

namespace {

// A "host:port" an operator wrote: no scheme (etcd's client URLs are
// written without "http://" here) and a port.
bool IsHostPort(const std::string& s) {
  const size_t colon = s.rfind(':');
  return !s.empty() && s.find("://") == std::string::npos && colon != std::string::npos &&
         colon > 0 && colon + 1 < s.size() &&
         s.find_first_not_of("0123456789", colon + 1) == std::string::npos;
}

}  // namespace

Status ReadClusterEtcd(const toml::node& node, std::string_view source, EtcdConfig& out) {
  auto error = [source](const toml::node& n, std::string_view key, std::string_view problem) {
    return InvalidArgument(source, ":", n.source().begin.line, ": key '", key, "': ", problem);
  };
  const toml::table* t = node.as_table();
  if (!t) return error(node, "cluster.etcd", "must be a table ([cluster.etcd])");
  for (const auto& [k, v] : *t) {
    const std::string key = StrCat("cluster.etcd.", k.str());
    if (k.str() == "endpoints") {
      const toml::array* a = v.as_array();
      if (!a || a->empty()) return error(v, key, "must be a non-empty list of \"host:port\"");
      for (const toml::node& e : *a) {
        const std::optional<std::string> s = e.value<std::string>();
        if (!s || !e.is_string() || !IsHostPort(*s)) {
          return error(e, key, "each endpoint is a \"host:port\" string (no scheme)");
        }
        out.endpoints.push_back(*s);
      }
    } else if (k.str() == "prefix" || k.str() == "advertise") {
      const std::optional<std::string> s = v.value<std::string>();
      if (!s || !v.is_string()) return error(v, key, "must be a string");
      if (k.str() == "prefix") {
        if (s->empty() || s->back() != '/') {
          return error(v, key, "must be non-empty and end in '/'");
        }
        out.prefix = *s;
      } else {
        if (!IsHostPort(*s)) return error(v, key, "must be \"host:port\"");
        out.advertise = *s;
      }
    } else if (k.str() == "lease_ttl_s" || k.str() == "poll_ms") {
      const std::optional<int64_t> n = v.value<int64_t>();
      const bool ttl = k.str() == "lease_ttl_s";
      const int64_t lo = ttl ? 2 : 50, hi = ttl ? 3600 : 60000;
      if (!n || !v.is_integer() || *n < lo || *n > hi) {
        return error(v, key, StrCat("must be an integer from ", lo, " to ", hi));
      }
      (ttl ? out.lease_ttl_s : out.poll_ms) = static_cast<uint32_t>(*n);
    } else {
      return error(v, key,
                   "unknown key (known here: endpoints, prefix, lease_ttl_s, poll_ms, advertise)");
    }
  }
  return OkStatus();
}

}  // namespace isometry
