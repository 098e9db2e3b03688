// isoctl qos: the traffic classes, and per channel how each class's share
// compares with its weight (docs/guides/qos.md).
#include <cmath>

#include "core/log_escape.h"
#include "core/thread_nice.h"
#include "tools/isoctl/format.h"
#include "tools/isoctl/render.h"

namespace isometry::isoctl {
namespace {

using Align = Table::Align;

std::string Percent(double fraction) {
  return std::to_string(static_cast<int>(std::lround(fraction * 100))) + "%";
}

std::string Caps(const v1::QosChannelShare& c) {
  if (c.paused()) return "paused (cap 0)";
  std::string out;
  if (c.rate_cap()) out = FormatRate(static_cast<double>(c.rate_cap()));
  if (c.in_flight_cap() >= 0) {
    out += (out.empty() ? "" : ", ") + std::to_string(c.in_flight_cap()) + " in flight";
  }
  return out.empty() ? "-" : out;
}

std::string Classes(const v1::GetQosResponse& r) {
  Table t({{"CLASS"},
           {"WEIGHT", Align::kRight},
           {"MAX-PRIO", Align::kRight},
           {"NICE", Align::kRight},
           {"MEMBERS", Align::kRight},
           {"TRANSFERS", Align::kRight},
           {"CLAMPED", Align::kRight},
           {"NOTE"}});
  for (const v1::QosClassInfo& c : r.classes()) {
    std::string note = c.is_default() ? "default" : "";
    if (c.retired()) note = "retired by a reload";
    if (c.name() == r.own_class()) note += note.empty() ? "yours" : ", yours";
    if (!c.nice_applied()) note += note.empty() ? "nice not applied" : ", nice not applied";
    t.AddRow({ForLog(c.name(), 64), std::to_string(c.weight()),
              c.max_priority() == 2147483647 ? "-" : std::to_string(c.max_priority()),
              ThreadNiceText(c.nice()), std::to_string(c.members()), std::to_string(c.transfers()),
              std::to_string(c.clamped()), note.empty() ? "-" : note});
  }
  return t.Render();
}

// Rows for the channels a class used or has work on (all with -o wide).
std::string Shares(const v1::GetQosResponse& r, bool wide) {
  Table t({{"CLASS"},
           {"CHANNEL"},
           {"SHARE", Align::kRight},
           {"WEIGHT-SHARE", Align::kRight},
           {"RATE", Align::kRight},
           {"IN-FLIGHT", Align::kRight},
           {"QUEUED", Align::kRight},
           {"MOVED", Align::kRight},
           {"THROTTLED", Align::kRight},
           {"CAPS"}});
  for (const v1::QosClassInfo& c : r.classes()) {
    for (const v1::QosChannelShare& s : c.channels()) {
      const bool capped = s.paused() || s.rate_cap() || s.in_flight_cap() >= 0;
      if (!wide && s.bytes() == 0 && s.xds_queued() == 0 && !capped) continue;
      t.AddRow({ForLog(c.name(), 64), s.channel(), Percent(s.share()),
                s.weight_share() > 0 ? Percent(s.weight_share()) : "idle",
                FormatRate(s.recent_bytes_per_s()), std::to_string(s.in_flight()),
                std::to_string(s.xds_queued()), FormatBytes(s.bytes()),
                FormatDuration(s.throttled_s()), Caps(s)});
    }
  }
  return t.empty() ? "no class has used a channel yet\n" : t.Render();
}

std::string Members(const v1::GetQosResponse& r) {
  Table t({{"CLASS"}, {"SESSION", Align::kRight}, {"CLIENT"}, {"UID", Align::kRight}, {"BY"}});
  for (const v1::QosClassInfo& c : r.classes()) {
    for (const v1::QosMember& m : c.member_list()) {
      t.AddRow({ForLog(c.name(), 64), std::to_string(m.session()), ForLog(m.client_name(), 64),
                m.uid() < 0 ? "-" : std::to_string(m.uid()),
                m.by_operator() ? "operator" : "rules"});
    }
  }
  return t.empty() ? "" : "\n" + t.Render();
}

std::string Qos(const v1::GetQosResponse& r, bool wide) {
  return Classes(r) + "\n" + Shares(r, wide) + Members(r);
}

}  // namespace

std::string RenderQos(const v1::GetQosResponse& r) { return Qos(r, false); }
std::string RenderQosWide(const v1::GetQosResponse& r) { return Qos(r, true); }

}  // namespace isometry::isoctl
