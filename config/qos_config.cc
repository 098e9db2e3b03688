#include "config/qos_config.h"

#include <algorithm>
#include <set>

#include "config/config_origin.h"
#include "core/strings.h"

namespace isometry {

std::vector<QosClass> QosConfig::Effective() const {
  if (!classes.empty()) return classes;
  QosClass only;
  only.name = kDefaultQosClass;
  return {only};
}

const QosClass* FindQosClass(const std::vector<QosClass>& classes, const std::string& name) {
  for (const QosClass& c : classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

namespace {

bool Matches(const QosRule& rule, const QosClient& client) {
  if (rule.for_peers() != !client.peer.empty()) return false;
  if (!rule.peer.empty() && rule.peer != client.peer) return false;
  if (!rule.remote_class.empty() && rule.remote_class != client.remote_class) return false;
  if (rule.uid && client.uid != rule.uid) return false;
  if (rule.gid && client.gid != rule.gid &&
      std::find(client.groups.begin(), client.groups.end(), *rule.gid) == client.groups.end()) {
    return false;
  }
  return rule.client.empty() || rule.client == client.name;
}

// Whether `a` gets more than `b` anywhere: a larger weight, a higher
// ceiling, a lower nice value, or fewer caps (a kind `b` caps that `a` does not, or caps
// higher). A rule by client name alone may not lift anyone into such a
// class: any client can give any name.
bool Outranks(const QosClass& a, const QosClass& b) {
  if (a.weight > b.weight || a.max_priority > b.max_priority || a.nice < b.nice) return true;
  for (const auto& [kind, cap] : b.caps) {
    auto it = a.caps.find(kind);
    const QosCaps none;
    const QosCaps& ac = it == a.caps.end() ? none : it->second;
    if (cap.rate_bytes_per_s &&
        (!ac.rate_bytes_per_s || *ac.rate_bytes_per_s > *cap.rate_bytes_per_s)) {
      return true;
    }
    if (cap.in_flight && (!ac.in_flight || *ac.in_flight > *cap.in_flight)) return true;
  }
  return false;
}

}  // namespace

const std::string& QosConfig::ClassOf(const QosClient& client) const {
  for (const QosRule& r : rules) {
    if (Matches(r, client)) return r.class_name;
  }
  static const std::string kDefault = kDefaultQosClass;
  if (classes.empty()) return kDefault;
  if (!client.peer.empty()) {
    for (const QosClass& c : classes) {
      if (c.name == client.remote_class) return c.name;
    }
  }
  if (!client.uid && client.peer.empty() && !grpc_class.empty()) return grpc_class;
  return default_class;
}

Status QosConfig::Validate() const {
  const std::vector<QosClass> all = Effective();
  std::set<std::string> names;
  for (size_t i = 0; i < classes.size(); ++i) {
    const QosClass& c = classes[i];
    const std::string key = StrCat("qos.class[", i, "]");
    if (c.name.empty()) return ConfigKeyError(key + ".name", "a class needs a name");
    if (!names.insert(c.name).second) {
      return ConfigKeyError(key + ".name", "class '", c.name, "' is defined twice");
    }
    if (c.weight < 1) return ConfigKeyError(key + ".weight", "weight must be at least 1");
  }
  const QosClass* fallback = FindQosClass(all, default_class);
  if (!fallback) {
    return ConfigKeyError("qos.default_class", "default_class '", default_class,
                          "' is not a class; define it with [[qos.class]] name = \"", default_class,
                          "\"");
  }
  const QosClass* grpc = grpc_class.empty() ? fallback : FindQosClass(all, grpc_class);
  if (!grpc) {
    return ConfigKeyError("qos.grpc_class", "grpc_class '", grpc_class,
                          "' is not a class; define it with [[qos.class]]");
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    const QosRule& r = rules[i];
    const std::string key = StrCat("qos.rule[", i, "]");
    const QosClass* target = FindQosClass(all, r.class_name);
    if (!target) {
      return ConfigKeyError(key + ".class", "class '", r.class_name,
                            "' is not defined by any [[qos.class]]");
    }
    if (r.for_peers()) {
      if (r.uid || r.gid || !r.client.empty()) {
        return ConfigKeyError(key, "a rule for peers' halves (peer, remote_class) takes no uid, ",
                              "gid or client: those are local clients'");
      }
      continue;
    }
    if (!r.uid && !r.gid && r.client.empty()) {
      return ConfigKeyError(key, "a rule needs uid, gid, client, peer or remote_class (else it ",
                            "matches everyone: set qos.default_class instead)");
    }
    if (r.client.size() > kMaxClientName) {
      return ConfigKeyError(key + ".client", "client names are kept to ", kMaxClientName,
                            " bytes: a longer one never matches");
    }
    if (!r.uid && !r.gid && (Outranks(*target, *fallback) || Outranks(*target, *grpc))) {
      return ConfigKeyError(key + ".client", "a rule by client name alone may not put clients in '",
                            r.class_name, "', which gets more than the default class '",
                            default_class,
                            "' or grpc_class (a client chooses its own name): add uid or gid to "
                            "the rule");
    }
  }
  return OkStatus();
}

}  // namespace isometry
