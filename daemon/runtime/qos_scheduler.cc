#include "daemon/runtime/qos_scheduler.h"

#include <algorithm>
#include <cmath>

namespace isometry {
namespace {

constexpr double kRecentSeconds = 1.0;  // time constant of QosShare::recent

QosLimits LimitsOf(const QosClass& c, ChannelKind kind) {
  QosLimits l;
  l.weight = std::max<uint32_t>(c.weight, 1);
  l.nice = c.nice;
  auto it = c.caps.find(kind);
  if (it == c.caps.end()) return l;
  if (it->second.rate_bytes_per_s) {
    l.rate_bytes_per_s = *it->second.rate_bytes_per_s;
    l.paused |= l.rate_bytes_per_s == 0;
  }
  if (it->second.in_flight) {
    l.in_flight = *it->second.in_flight;
    l.paused |= l.in_flight == 0;
  }
  return l;
}

}  // namespace

std::shared_ptr<const QosTable> QosTable::Make(const QosConfig& config,
                                               const std::vector<ChannelKind>& kinds,
                                               const QosTable* previous) {
  auto table = std::make_shared<QosTable>();
  if (previous) {
    table->classes = previous->classes;
    for (Class& c : table->classes) c.retired = true;
  }
  for (const QosClass& c : config.Effective()) {
    auto it = std::find_if(table->classes.begin(), table->classes.end(),
                           [&](const Class& k) { return k.name == c.name; });
    if (it == table->classes.end()) it = table->classes.insert(table->classes.end(), Class{});
    it->name = c.name;
    it->weight = std::max<uint32_t>(c.weight, 1);
    it->max_priority = c.max_priority;
    it->nice = c.nice;
    it->retired = false;
    it->per_channel.clear();
    for (ChannelKind kind : kinds) it->per_channel.push_back(LimitsOf(c, kind));
  }
  size_t live = 0;
  for (Class& c : table->classes) {
    if (c.retired) {  // scheduled plainly until its transfers end
      c.weight = 1;
      c.max_priority = std::numeric_limits<int32_t>::max();
      c.nice = 0;
      c.per_channel.assign(kinds.size(), QosLimits{});
    }
    live += !c.retired;
    for (const QosLimits& l : c.per_channel) table->trivial &= !l.capped();
  }
  table->trivial &= table->classes.size() == 1 && live == 1;
  const std::string& fallback =
      config.classes.empty() ? std::string(kDefaultQosClass) : config.default_class;
  for (size_t i = 0; i < table->classes.size(); ++i) {
    if (table->classes[i].name == fallback && !table->classes[i].retired) {
      table->default_class = i;
    }
  }
  return table;
}

size_t QosTable::Find(const std::string& name) const {
  for (size_t i = 0; i < classes.size(); ++i) {
    if (classes[i].name == name && !classes[i].retired) return i;
  }
  return default_class;
}

void QosWorker::Resize(size_t classes) {
  while (shares.size() < classes) {
    shares.emplace_back();
    shares.back().finish_tag = virtual_time;
  }
  seen.assign(shares.size(), 0);
}

bool QosWorker::HeldBack(size_t c, const QosLimits& limits, QosClock::time_point now,
                         QosClock::time_point& wake) {
  QosShare& s = shares[c];
  bool held = limits.paused || s.in_flight >= limits.in_flight;
  if (!held && limits.rate_bytes_per_s && s.next_allowed > now) {
    held = true;
    wake = std::min(wake, s.next_allowed);
  }
  if (held && s.throttled_since == QosClock::time_point{}) s.throttled_since = now;
  if (!held && s.throttled_since != QosClock::time_point{}) {
    s.throttled_s += std::chrono::duration<double>(now - s.throttled_since).count();
    s.throttled_since = {};
  }
  return held;
}

double QosWorker::StartTag(size_t c) const { return std::max(shares[c].finish_tag, virtual_time); }

void QosWorker::Charge(size_t c, const QosLimits& limits, uint64_t bytes,
                       QosClock::time_point now) {
  QosShare& s = shares[c];
  const double start = StartTag(c);
  virtual_time = start;
  s.finish_tag = start + static_cast<double>(bytes) / limits.weight;
  ++s.in_flight;
  ++s.requests;
  s.bytes += bytes;
  s.recent = RecentRate(c, now) * kRecentSeconds + static_cast<double>(bytes);
  s.recent_at = now;
  if (limits.rate_bytes_per_s) {
    const auto cost = std::chrono::duration_cast<QosClock::duration>(std::chrono::duration<double>(
        static_cast<double>(bytes) / static_cast<double>(limits.rate_bytes_per_s)));
    s.next_allowed = std::max(s.next_allowed, now - kQosBurst) + cost;
  }
}

double QosWorker::RecentRate(size_t c, QosClock::time_point now) const {
  const QosShare& s = shares[c];
  if (s.recent_at == QosClock::time_point{}) return 0;
  const double age = std::chrono::duration<double>(now - s.recent_at).count();
  return s.recent * std::exp(-std::max(age, 0.0) / kRecentSeconds) / kRecentSeconds;
}

double QosWorker::ThrottledSeconds(size_t c, QosClock::time_point now) const {
  const QosShare& s = shares[c];
  double t = s.throttled_s;
  if (s.throttled_since != QosClock::time_point{}) {
    t += std::chrono::duration<double>(now - s.throttled_since).count();
  }
  return t;
}

}  // namespace isometry
