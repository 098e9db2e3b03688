// Runtime::Impl, traffic classes (qos_scheduler.h): installing a table at
// start and on reload, the staging share of each class at admission, and
// the per-class reports. The workers' pick is in dma_worker.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "channels/channel_factory.h"
#include "core/log_escape.h"
#include "core/thread_nice.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {

std::vector<ChannelKind> Runtime::Impl::ChannelKinds() const {
  std::vector<ChannelKind> kinds;
  for (const auto& ch : channels) kinds.push_back(ch->caps().kind);
  return kinds;
}

void Runtime::Impl::InstallQos(std::shared_ptr<const QosTable> table) {
  qos = std::move(table);
  class_held.resize(qos->classes.size(), std::vector<uint64_t>(pools.size(), 0));
  while (class_wait.size() < qos->classes.size()) {
    class_wait.push_back(std::make_unique<Histogram>(kSecondsBounds));
  }
  for (auto& w : workers) {
    w->qos.Resize(qos->classes.size());
    w->cv.SignalAll();  // a cap lifted, a paused class resumed
  }
  AdmitWaiting();  // shares changed
}

void Runtime::SetQos(const QosConfig& config) {
  for (const QosClass& c : config.classes) {
    if (c.nice > 0 && !ThreadNiceSupported()) {
      spdlog::warn("qos: class '{}' has nice = {}, which no thread takes: {}", ForLog(c.name, 64),
                   c.nice == kIdleThreadNice ? "\"idle\"" : ThreadNiceText(c.nice),
                   ThreadNiceUnsupportedReason());
    }
  }
  absl::MutexLock lock(&impl_->mu);
  // Numbers are kept once a transfer may have used them; before the first
  // (the node installing its config at start) the table starts afresh.
  const QosTable* previous = impl_->stats.transfers_submitted ? impl_->qos.get() : nullptr;
  impl_->InstallQos(QosTable::Make(config, impl_->ChannelKinds(), previous));
}

int32_t Runtime::QosCeiling(const std::string& name) const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->qos->classes[impl_->qos->Find(name)].max_priority;
}

bool Runtime::QosCappedOnNetwork(const std::string& name) const {
  absl::MutexLock lock(&impl_->mu);
  const QosTable::Class& c = impl_->qos->classes[impl_->qos->Find(name)];
  for (size_t i = 0; i < c.per_channel.size() && i < impl_->channels.size(); ++i) {
    const ChannelBackend* b = FindBackend(impl_->channels[i]->caps().kind);
    if (b && b->per_peer && c.per_channel[i].capped()) return true;
  }
  return false;
}

void Runtime::Impl::HoldBuffers(const TransferState& t, bool take) {
  for (const RingBuffer& b : t.buffers) {
    if (b.remote || b.in_window || !b.data) continue;
    uint64_t& held = class_held[t.qos][b.pool];
    held = take ? held + b.bytes() : held - std::min(held, b.bytes());
  }
}

// A class may hold at most its weight's part of a pool while another
// class waits for that pool, so that buffers freed go to the waiting one;
// a class holding nothing there may always take one transfer's worth (a
// transfer larger than its part is not starved).
bool Runtime::Impl::OverShare(const TransferState& t,
                              const std::vector<size_t>& waiting_per_class) const {
  if (qos->trivial) return false;
  const auto waits = [&](size_t c) { return waiting_per_class[c] > 0; };
  size_t classes_waiting = 0;
  for (size_t c = 0; c < waiting_per_class.size(); ++c) classes_waiting += waits(c);
  if (classes_waiting < 2) return false;
  const std::vector<uint64_t> need = NeedPerPool(t);
  for (size_t p = 0; p < pools.size(); ++p) {
    if (need[p] == 0 || class_held[t.qos][p] == 0) continue;
    uint64_t weights = 0;
    for (size_t c = 0; c < qos->classes.size(); ++c) {
      if (c == t.qos || waits(c) || class_held[c][p]) {
        weights += qos->classes[c].weight;
      }
    }
    const double part = static_cast<double>(pools[p].budget()) * qos->classes[t.qos].weight /
                        static_cast<double>(std::max<uint64_t>(weights, 1));
    if (static_cast<double>(class_held[t.qos][p] + need[p]) > part) return true;
  }
  return false;
}

bool Runtime::Impl::Paused(const TransferState& t) const {
  for (const auto& x : t.xds) {
    if (!x->remote && qos->classes[t.qos].per_channel[x->channel].paused) return true;
  }
  return false;
}

std::vector<QosClassStats> Runtime::Qos() const {
  absl::MutexLock lock(&impl_->mu);
  const QosTable& q = *impl_->qos;
  const auto now = RuntimeClock::now();
  std::vector<QosClassStats> out(q.classes.size());
  for (size_t c = 0; c < q.classes.size(); ++c) {
    QosClassStats& s = out[c];
    s.name = q.classes[c].name;
    s.weight = q.classes[c].weight;
    s.max_priority = q.classes[c].max_priority;
    s.nice = q.classes[c].nice;
    s.nice_applied = s.nice == 0 || ThreadNiceSupported();
    s.retired = q.classes[c].retired;
    s.is_default = c == q.default_class;
  }
  for (const auto& [id, t] : impl_->active) ++out[t->qos].transfers;
  for (const auto& t : impl_->waiting) ++out[t->qos].transfers;
  for (const auto& w : impl_->workers) {
    std::vector<int> queued(q.classes.size(), 0);
    for (const XdState* x : w->pool) {
      if (x->done_count < x->transfer->grid->count()) ++queued[x->transfer->qos];
    }
    double recent_all = 0;
    uint64_t busy_weights = 0;
    for (size_t c = 0; c < q.classes.size(); ++c) {
      recent_all += w->qos.RecentRate(c, now);
      if (queued[c] || w->qos.shares[c].in_flight) busy_weights += q.classes[c].weight;
    }
    for (size_t c = 0; c < q.classes.size(); ++c) {
      const QosShare& sh = w->qos.shares[c];
      const QosLimits& l = q.classes[c].per_channel[w->channel];
      QosChannelStats cs;
      cs.channel = impl_->channels[w->channel]->caps().name;
      cs.bytes = sh.bytes;
      cs.requests = sh.requests;
      cs.in_flight = sh.in_flight;
      cs.xds_queued = queued[c];
      cs.recent_bps = w->qos.RecentRate(c, now);
      cs.share = recent_all > 0 ? cs.recent_bps / recent_all : 0;
      const bool busy = queued[c] || sh.in_flight;
      cs.weight_share = busy && busy_weights ? double(l.weight) / double(busy_weights) : 0;
      cs.throttled_s = w->qos.ThrottledSeconds(c, now);
      cs.rate_cap = l.rate_bytes_per_s;
      cs.in_flight_cap = l.in_flight == std::numeric_limits<int>::max() ? -1 : l.in_flight;
      cs.paused = l.paused;
      out[c].channels.push_back(std::move(cs));
    }
  }
  for (size_t c = 0; c < q.classes.size(); ++c) out[c].queue_wait = impl_->class_wait[c]->Counts();
  return out;
}

}  // namespace isometry
