// Quality of service between tenants ([qos] of the config file;
// docs/guides/qos.md): traffic classes that share every channel by weight,
// with optional caps per channel kind and a ceiling on the priority their
// members' copies run at, and the rules that put clients in them.
//
// Without a [qos] table the daemon has one class, "default", weight 1, no
// caps and no ceiling: every copy is scheduled as before classes existed.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/channel_kind.h"
#include "core/status.h"

namespace isometry {

inline constexpr char kDefaultQosClass[] = "default";
// Sessions keep this much of the name their client gives.
inline constexpr size_t kMaxClientName = 128;

// What a class may take of every channel of one kind. A cap of 0 pauses
// the class's requests there (its copies wait; they never fail).
struct QosCaps {
  std::optional<uint64_t> rate_bytes_per_s;  // per channel of the kind
  std::optional<int> in_flight;              // requests at once, per channel of the kind
};

struct QosClass {
  std::string name;
  uint32_t weight = 1;  // its share of a busy channel against the other busy classes'
  // The highest priority its members' copies run at: a copy asking for
  // more runs at this one, and says so (it is never refused for it).
  int32_t max_priority = std::numeric_limits<int32_t>::max();
  std::map<ChannelKind, QosCaps> caps;
  // The nice value (0 to 19) of the daemon's threads while they move this
  // class's bytes: on a node whose CPUs are busy, a thread working for a
  // class with a higher value yields the CPU to one working for a class
  // with a lower value (core/thread_nice.h).
  int nice = 0;
};

// Puts the clients it matches in `class_name`; every condition given must
// hold. A client's name is its own choice, so a rule by name alone may
// only lower a client (QosConfig::Validate). A rule with `peer` or
// `remote_class` matches only the halves of cross-node copies that peers
// start here: `peer` the node that asked (cluster.node_name), `remote_class`
// the class the copy runs in there.
struct QosRule {
  std::string class_name;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::string client;  // the client's name ("" = any)
  std::string peer;
  std::string remote_class;
  bool for_peers() const { return !peer.empty() || !remote_class.empty(); }
};

// Who a client is, as far as rules can tell: local clients have a uid and
// gid (SO_PEERCRED); gRPC clients have only their name; a peer's half of a
// cross-node copy has the peer and the class it runs in there.
struct QosClient {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::vector<uint32_t> groups;  // supplementary (SO_PEERGROUPS); a gid rule matches these too
  std::string name;
  std::string peer;          // set for a peer's half
  std::string remote_class;  // ... and its class on that peer
};

struct QosConfig {
  std::vector<QosClass> classes;  // empty: the single "default" class
  std::vector<QosRule> rules;     // the first that matches wins
  std::string default_class = kDefaultQosClass;
  // Where sessions without a uid (gRPC) go when no rule names them; "":
  // the default class. A uid or gid rule cannot reach them: a user it
  // lowers could otherwise attach over gRPC to escape it.
  std::string grpc_class;

  // The classes in force: `classes`, or the implicit default one.
  std::vector<QosClass> Effective() const;
  // Which class `client` belongs to: the first matching rule's, else the
  // default class. A peer's half without a matching rule runs in the class
  // of its remote class's name where this node has one (nodes configured
  // alike keep a copy in one class end to end), else the default class.
  const std::string& ClassOf(const QosClient& client) const;
  // Unique names, known classes in rules, default_class and grpc_class,
  // weights >= 1, and no rule by name alone into a class above the default
  // one or grpc_class.
  // Errors are ConfigKeyErrors ("qos.rule[1].class").
  Status Validate() const;
};

// A class by name among `classes` (QosConfig::Effective()); null if none.
const QosClass* FindQosClass(const std::vector<QosClass>& classes, const std::string& name);

}  // namespace isometry
