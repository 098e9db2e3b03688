#include "daemon/server/qos_rpc.h"

#include "daemon/node/traffic_classes.h"

namespace isometry {

void ToProto(const QosReport& r, v1::GetQosResponse* out) {
  out->set_own_class(r.own_class);
  for (const QosClassReport& c : r.classes) {
    v1::QosClassInfo* o = out->add_classes();
    o->set_name(c.stats.name);
    o->set_weight(c.stats.weight);
    o->set_max_priority(c.stats.max_priority);
    o->set_nice(c.stats.nice);
    o->set_nice_applied(c.stats.nice_applied);
    o->set_retired(c.stats.retired);
    o->set_is_default(c.stats.is_default);
    o->set_transfers(c.stats.transfers);
    o->set_members(c.members);
    o->set_clamped(c.clamped);
    for (const QosMember& m : c.member_list) {
      v1::QosMember* p = o->add_member_list();
      p->set_session(m.session);
      p->set_client_name(m.client);
      p->set_uid(m.uid);
      p->set_by_operator(m.by_operator);
    }
    for (const QosChannelStats& s : c.stats.channels) {
      v1::QosChannelShare* p = o->add_channels();
      p->set_channel(s.channel);
      p->set_bytes(s.bytes);
      p->set_requests(s.requests);
      p->set_in_flight(s.in_flight);
      p->set_xds_queued(s.xds_queued);
      p->set_recent_bytes_per_s(s.recent_bps);
      p->set_share(s.share);
      p->set_weight_share(s.weight_share);
      p->set_throttled_s(s.throttled_s);
      p->set_rate_cap(s.rate_cap);
      p->set_in_flight_cap(s.in_flight_cap);
      p->set_paused(s.paused);
    }
  }
}

void SetTerms(const CopyTerms& terms, v1::CopyResponse* out) {
  out->set_priority(terms.priority);
  out->set_qos_class(terms.qos_class);
  out->set_requested_priority(terms.requested_priority);
}

Status SetSessionClassRpc(Node& node, bool is_operator, const v1::SetSessionClassRequest& req) {
  if (!is_operator) {
    return PermissionDenied(
        "putting a session in a traffic class is an operator action: pass the operator token "
        "(isoctl --operator-token, file ",
        node.config().daemon.state_dir, "/operator.token)");
  }
  return node.traffic_classes().SetSessionClass(req.session(), req.class_name());
}

}  // namespace isometry
