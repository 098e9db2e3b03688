#include "config/qos_config_parser.h"

#include <limits>

#include "config/config_reader.h"
#include "core/thread_nice.h"

namespace isometry {
namespace {

// "200MiB", "200MiB/s" or a number of bytes, per second.
Result<uint64_t> Rate(const Reader& r, const toml::node& n, const std::string& key) {
  if (auto s = n.value<std::string>()) {
    std::string text = *s;
    if (text.size() > 2 && text.compare(text.size() - 2, 2, "/s") == 0) {
      text.resize(text.size() - 2);
    }
    auto v = ParseByteSize(text);
    if (!v.ok()) return r.Error(n, key, std::string(v.status().message()));
    return *v;
  }
  return r.Size(n, key);
}

Status ReadCaps(const Reader& r, const toml::node& n, const std::string& key, QosClass& c) {
  const toml::table* t = n.as_table();
  if (!t) {
    return r.Error(n, key, "must be a table like { disk_read = { rate = \"200MiB/s\" } }");
  }
  for (const auto& [k, v] : *t) {
    const std::string kind_key = StrCat(key, ".", k.str());
    const std::optional<ChannelKind> kind = ParseChannelKind(k.str());
    if (!kind) {
      return r.Error(v, kind_key,
                     "not a channel kind (memcpy, cma, disk_read, disk_write, remote_memcpy, "
                     "gpu_read, gpu_write, gpu_copy)");
    }
    const toml::table* caps = v.as_table();
    if (!caps) {
      return r.Error(v, kind_key, "must be a table like { rate = \"1GiB/s\", in_flight = 2 }");
    }
    ISO_RETURN_IF_ERROR(r.OnlyKeys(*caps, kind_key + ".", {"rate", "in_flight"}));
    QosCaps& out = c.caps[*kind];
    if (const toml::node* rate = caps->get("rate")) {
      ISO_ASSIGN_OR_RETURN(out.rate_bytes_per_s, Rate(r, *rate, kind_key + ".rate"));
    }
    if (const toml::node* in_flight = caps->get("in_flight")) {
      ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*in_flight, kind_key + ".in_flight", 0, 1 << 16));
      out.in_flight = static_cast<int>(v);
    }
  }
  return OkStatus();
}

// 0 to 19, or "idle" (kIdleThreadNice: the class's work runs under SCHED_IDLE).
Result<int> Nice(const Reader& r, const toml::node& n, const std::string& key) {
  if (n.is_string() && *n.value<std::string>() == "idle") return kIdleThreadNice;
  if (!n.is_integer()) {
    return r.Error(n, key, StrCat("must be an integer from 0 to ", kMaxThreadNice, " or \"idle\""));
  }
  ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(n, key, 0, kMaxThreadNice));
  return static_cast<int>(v);
}

Result<QosClass> ReadClass(const Reader& r, const toml::table& t, const std::string& key) {
  ISO_RETURN_IF_ERROR(
      r.OnlyKeys(t, "qos.class.", {"name", "weight", "max_priority", "nice", "caps"}));
  QosClass c;
  const toml::node* name = t.get("name");
  if (!name) return InvalidArgument(r.source(), ": key '", key, ".name': every class needs a name");
  ISO_ASSIGN_OR_RETURN(c.name, r.String(*name, key + ".name"));
  if (const toml::node* n = t.get("weight")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, key + ".weight", 1, 1 << 20));
    c.weight = static_cast<uint32_t>(v);
  }
  if (const toml::node* n = t.get("max_priority")) {
    ISO_ASSIGN_OR_RETURN(
        int64_t v, r.Integer(*n, key + ".max_priority", 0, std::numeric_limits<int32_t>::max()));
    c.max_priority = static_cast<int32_t>(v);
  }
  if (const toml::node* n = t.get("nice")) {
    ISO_ASSIGN_OR_RETURN(c.nice, Nice(r, *n, key + ".nice"));
  }
  if (const toml::node* n = t.get("caps")) ISO_RETURN_IF_ERROR(ReadCaps(r, *n, key + ".caps", c));
  return c;
}

Result<QosRule> ReadRule(const Reader& r, const toml::table& t, const std::string& key) {
  ISO_RETURN_IF_ERROR(
      r.OnlyKeys(t, "qos.rule.", {"class", "uid", "gid", "client", "peer", "remote_class"}));
  QosRule rule;
  const toml::node* cls = t.get("class");
  if (!cls) return InvalidArgument(r.source(), ": key '", key, ".class': every rule names a class");
  ISO_ASSIGN_OR_RETURN(rule.class_name, r.String(*cls, key + ".class"));
  if (const toml::node* n = t.get("uid")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, key + ".uid", 0, 0xFFFFFFFE));
    rule.uid = static_cast<uint32_t>(v);
  }
  if (const toml::node* n = t.get("gid")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, key + ".gid", 0, 0xFFFFFFFE));
    rule.gid = static_cast<uint32_t>(v);
  }
  if (const toml::node* n = t.get("client")) {
    ISO_ASSIGN_OR_RETURN(rule.client, r.String(*n, key + ".client"));
  }
  if (const toml::node* n = t.get("peer")) {
    ISO_ASSIGN_OR_RETURN(rule.peer, r.String(*n, key + ".peer"));
  }
  if (const toml::node* n = t.get("remote_class")) {
    ISO_ASSIGN_OR_RETURN(rule.remote_class, r.String(*n, key + ".remote_class"));
  }
  return rule;
}

// [[qos.KEY]] tables, each read by `read_one`.
template <typename T, typename ReadOne>
Status ReadList(const Reader& r, const toml::table& qos, const char* key, ReadOne read_one,
                std::vector<T>& out) {
  const toml::node* n = qos.get(key);
  if (!n) return OkStatus();
  const toml::array* arr = n->as_array();
  const std::string full = StrCat("qos.", key);
  if (!arr) return r.Error(*n, full, StrCat("must be written as [[", full, "]] tables"));
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = arr->get(i)->as_table();
    if (!t) return r.Error(*arr->get(i), full, StrCat("must be written as [[", full, "]] tables"));
    ISO_ASSIGN_OR_RETURN(T item, read_one(r, *t, StrCat(full, "[", i, "]")));
    out.push_back(std::move(item));
  }
  return OkStatus();
}

}  // namespace

Status ReadQos(const toml::node& node, std::string_view source, QosConfig& out) {
  const Reader r(source);
  const toml::table* t = node.as_table();
  if (!t) return r.Error(node, "qos", "must be a table");
  ISO_RETURN_IF_ERROR(r.OnlyKeys(*t, "qos.", {"default_class", "grpc_class", "class", "rule"}));
  ISO_RETURN_IF_ERROR(ReadList(r, *t, "class", ReadClass, out.classes));
  ISO_RETURN_IF_ERROR(ReadList(r, *t, "rule", ReadRule, out.rules));
  if (const toml::node* n = t->get("grpc_class")) {
    ISO_ASSIGN_OR_RETURN(out.grpc_class, r.String(*n, "qos.grpc_class"));
  }
  if (const toml::node* n = t->get("default_class")) {
    ISO_ASSIGN_OR_RETURN(out.default_class, r.String(*n, "qos.default_class"));
  } else if (!out.classes.empty()) {
    out.default_class = out.classes.front().name;
  }
  return OkStatus();
}

}  // namespace isometry
