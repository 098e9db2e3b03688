// Node, traffic classes (docs/guides/qos.md): which class a session is in,
// reloading [qos], the operator's placements, and the report isoctl qos
// shows. The scheduling itself is the runtime's (qos_scheduler.h).
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "daemon/node/node_impl.h"

namespace isometry {

const std::string& Node::Impl::QosClassByRulesLocked(const Session& s) const {
  QosClient client;
  if (s.creds.known()) {
    client.uid = s.creds.uid;
    client.gid = s.creds.gid;
    client.groups.assign(s.creds.groups.begin(), s.creds.groups.end());
  }
  client.name = s.name;
  return qos.ClassOf(client);
}

void node::TrafficClasses::ReloadQos(const QosConfig& qos) {
  // The runtime first: a session placed in a new class below finds it.
  impl_->runtime->SetQos(qos);
  const std::vector<QosClass> classes = qos.Effective();
  absl::MutexLock lock(&impl_->mu);
  impl_->qos = qos;
  size_t moved = 0;
  for (auto& [id, session] : impl_->sessions) {
    Session& s = *session;
    const bool gone = !FindQosClass(classes, s.qos_class);
    if (s.qos_by_operator && !gone) continue;
    const std::string& now = impl_->QosClassByRulesLocked(s);
    moved += now != s.qos_class;
    s.qos_class = now;
    s.qos_by_operator = false;
  }
  spdlog::info("[qos] reloaded: {} class(es), {} rule(s), default '{}'; {} session(s) moved",
               classes.size(), qos.rules.size(), ForLog(qos.ClassOf(QosClient{})), moved);
}

Status node::TrafficClasses::SetSessionClass(uint64_t session, const std::string& class_name) {
  absl::MutexLock lock(&impl_->mu);
  if (!FindQosClass(impl_->qos.Effective(), class_name)) {
    return NotFound("no traffic class '", class_name, "' (isoctl qos lists them)");
  }
  auto it = impl_->sessions.find(session);
  if (it == impl_->sessions.end()) return NotFound("no session ", session);
  spdlog::info("session {} put in class '{}' by the operator (was '{}')", session,
               ForLog(class_name), ForLog(it->second->qos_class));
  it->second->qos_class = class_name;
  it->second->qos_by_operator = true;
  return OkStatus();
}

std::pair<std::string, int> node::TrafficClasses::QosForPeerHalf(const std::string& peer,
                                                                 const std::string& remote_class,
                                                                 int priority) const {
  QosClient half;
  half.peer = peer;
  half.remote_class = remote_class;
  std::string name;
  {
    absl::MutexLock lock(&impl_->mu);
    name = impl_->qos.ClassOf(half);
  }
  const int ceiling = impl_->runtime->QosCeiling(name);
  return {name, std::min(priority, ceiling)};
}

QosReport node::TrafficClasses::Report(SessionRef viewer, bool is_operator) const {
  std::vector<QosClassStats> stats = impl_->runtime->Qos();
  QosReport report;
  absl::MutexLock lock(&impl_->mu);
  if (const Session* own = impl_->FindSessionOrNull(viewer)) report.own_class = own->qos_class;
  for (QosClassStats& s : stats) {
    QosClassReport c;
    c.stats = std::move(s);
    if (auto it = impl_->qos_clamped.find(c.stats.name); it != impl_->qos_clamped.end()) {
      c.clamped = it->second;
    }
    for (const auto& [id, s] : impl_->sessions) {
      const Session& session = *s;
      if (session.qos_class != c.stats.name) continue;
      ++c.members;
      if (!is_operator) continue;
      c.member_list.push_back({id, session.name,
                               session.creds.known() ? int64_t{session.creds.uid} : -1,
                               session.qos_by_operator});
    }
    report.classes.push_back(std::move(c));
  }
  return report;
}

}  // namespace isometry
