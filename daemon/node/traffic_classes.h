// Traffic classes: the sessions in each, reloads, the operator's grant, the report (node_qos.cc).
// Node::traffic_classes() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class TrafficClasses {
 public:
  explicit TrafficClasses(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Traffic classes (node_qos.cc; docs/guides/qos.md). ReloadQos installs
  // a validated [qos] (SIGHUP): sessions are placed again by its rules
  // (the operator's placements stay), transfers keep running in their
  // classes' new shares. SetSessionClass is the operator's grant: session
  // `session` (its public number) joins `class_name` until it ends.
  void ReloadQos(const QosConfig& qos);

  Status SetSessionClass(uint64_t session, const std::string& class_name);

  // Classes, their shares per channel and members (the list of members
  // for the operator only; `viewer`'s own class named).
  QosReport Report(SessionRef viewer, bool is_operator) const;

  // The class a half of a cross-node copy that `peer` started runs in here
  // (its class there: `remote_class`), and `priority` within its ceiling.
  std::pair<std::string, int> QosForPeerHalf(const std::string& peer,
                                             const std::string& remote_class, int priority) const;

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
