#include "config/tls_config_parser.h"

#include "core/strings.h"

namespace isometry {

Status ReadClusterTls(const toml::node& node, std::string_view source, TlsConfig& out) {
  auto error = [source](const toml::node& n, std::string_view key, std::string_view problem) {
    return InvalidArgument(source, ":", n.source().begin.line, ": key '", key, "': ", problem);
  };
  const toml::table* t = node.as_table();
  if (!t) return error(node, "cluster.tls", "must be a table ([cluster.tls])");
  for (const auto& [k, v] : *t) {
    std::string* field = k.str() == "ca_file"     ? &out.ca_file
                         : k.str() == "cert_file" ? &out.cert_file
                         : k.str() == "key_file"  ? &out.key_file
                                                  : nullptr;
    const std::string key = StrCat("cluster.tls.", k.str());
    if (!field) return error(v, key, "unknown key (known here: ca_file, cert_file, key_file)");
    const std::optional<std::string> s = v.value<std::string>();
    if (!s || !v.is_string()) return error(v, key, "must be a string (a PEM file's path)");
    if (s->empty()) return error(v, key, "must not be empty");
    *field = *s;
  }
  return OkStatus();
}

}  // namespace isometry
