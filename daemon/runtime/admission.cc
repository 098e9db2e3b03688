// Runtime::Impl, admission and completion: a transfer takes all of its
// ring buffers or none (Isometry §3.6), its XDs join their channels' DMA
// worker pools, and it finishes (or is aborted) exactly once, giving back
// its buffers and waking whoever waits. Everything here runs under `mu`
// except Cancel/AbortNow, which take it.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "channels/cma/own_hops.h"
#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {

using Phase = TransferState::Phase;

void Completion::Run() {
  if (!transfer) return;
  transfer->done_cv.SignalAll();
  // Called once, then dropped: the callback may hold what holds this
  // transfer (a caller's record with its handle), a cycle otherwise.
  std::function<void(Status)> callback = std::exchange(transfer->on_complete, nullptr);
  if (callback) callback(std::move(status));
}

void Runtime::Impl::GiveBuffer(RingBuffer& b) {
  if (!b.data) return;
  if (b.in_window) {
    b.own_hops->Give(std::exchange(b.data, nullptr));
    b.in_window = false;
    return;
  }
  pools[b.pool].Give(std::exchange(b.data, nullptr), b.bytes());
}

// Takes every ring buffer of `t` or none: buffers are taken in the global
// memory order (Isometry §3.6), all under one lock, so a transfer never
// holds some buffers while waiting for others.
std::vector<uint64_t> Runtime::Impl::NeedPerPool(const TransferState& t) const {
  std::vector<uint64_t> need(pools.size(), 0);
  for (const RingBuffer& b : t.buffers) {
    if (!b.remote) need[b.pool] += b.bytes();
  }
  return need;
}

bool Runtime::Impl::TryAdmit(TransferState& t) {
  const std::vector<uint64_t> need = NeedPerPool(t);
  for (size_t p = 0; p < pools.size(); ++p) {
    if (!pools[p].Fits(need[p])) return false;
  }
  std::vector<RingBuffer*> order;
  for (RingBuffer& b : t.buffers) {
    if (!b.remote) order.push_back(&b);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const RingBuffer* a, const RingBuffer* b) { return a->memory < b->memory; });
  for (RingBuffer* b : order) {
    if (b->own_hops) {
      if (std::byte* w = b->own_hops->TryTake(b->bytes())) {
        b->data = w;
        b->in_window = true;
        continue;
      }
    }
    auto block = pools[b->pool].Take(b->bytes());
    if (!block.ok()) {  // out of host memory: undo and wait
      for (RingBuffer* u : order) GiveBuffer(*u);
      return false;
    }
    b->data = *block;
  }
  t.phase = Phase::kRunning;
  HoldBuffers(t, true);
  const auto now = RuntimeClock::now();
  for (auto& x : t.xds) {
    if (x->remote) continue;
    // A hop fed by this node's previous hop is ready once that hop's first
    // chunk is done (OnRequestDone); the others now.
    if (x->hop == 0 || t.xds[x->hop - 1]->remote) x->ready = now;
    DmaWorker& w = *workers[x->channel];
    w.WaitOf(t.options.priority);  // known from now on: its series stay at zero
    auto pos = std::upper_bound(
        w.pool.begin(), w.pool.end(), x.get(), [](const XdState* a, const XdState* b) {
          return a->transfer->options.priority > b->transfer->options.priority;
        });
    w.pool.insert(pos, x.get());
  }
  t.times.dispatch_seq_at_submit = workers[FirstLocalXd(t).channel]->dispatch_seq;
  return true;
}

// Admits waiting transfers in (priority, submission) order; stops at the
// first that does not fit so large transfers are not starved.
// Wakes only the workers of the transfers it admitted: no other XD became
// runnable. Waking every worker on every admission attempt (each finish
// tries one) cost a chain of futex wakeups per small copy, a large share of
// a 4 KiB ring copy's time (docs/benchmarks/design-measurements.md,
// "Wake-ups").
// With several classes the order holds within each class: a class whose
// first waiting transfer does not fit (or would take more than its share,
// OverShare) admits none after it, while the other classes go on.
void Runtime::Impl::AdmitWaiting() {
  if (waiting.empty()) return;  // every copy's end calls this: no tallies to build
  if (qos->trivial) {
    while (!waiting.empty() && TryAdmit(*waiting.front())) Admitted(0);
    return;
  }
  std::vector<uint8_t> stuck(qos->classes.size(), 0);
  // Transfers still waiting, per class: counted once here, kept as they
  // are admitted (OverShare asks which classes wait).
  std::vector<size_t> waiting_per_class(qos->classes.size(), 0);
  for (const auto& w : waiting) ++waiting_per_class[w->qos];
  for (size_t i = 0; i < waiting.size();) {
    TransferState& t = *waiting[i];
    if (Paused(t)) {  // takes no buffer while it could not use it
      ++i;
      continue;
    }
    if (stuck[t.qos] || OverShare(t, waiting_per_class) || !TryAdmit(t)) {
      stuck[t.qos] = 1;
      ++i;
      continue;
    }
    --waiting_per_class[t.qos];
    Admitted(i);
  }
}

void Runtime::Impl::Admitted(size_t i) {
  const std::shared_ptr<TransferState>& t = waiting[i];
  for (const auto& x : t->xds) {
    if (!x->remote && t.get() != issued_by_submitter) workers[x->channel]->cv.SignalAll();
  }
  active[t->id] = t;
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
}

void Runtime::Impl::Enqueue(std::shared_ptr<TransferState> t) {
  auto pos = std::upper_bound(waiting.begin(), waiting.end(), t, [](const auto& a, const auto& b) {
    return a->options.priority > b->options.priority;
  });
  waiting.insert(pos, std::move(t));
  ++stats.transfers_waiting_for_buffers;
  AdmitWaiting();
}

const XdState& Runtime::Impl::FirstLocalXd(const TransferState& t) {
  for (const auto& x : t.xds) {
    if (!x->remote) return *x;
  }
  return *t.xds.front();
}

void Runtime::Impl::NotifyWorkers() {
  for (auto& w : workers) w->cv.SignalAll();
}

Completion Runtime::Impl::Finish(const std::shared_ptr<TransferState>& t, Status status) {
  for (auto& x : t->xds) {
    if (x->remote) continue;
    auto& pool = workers[x->channel]->pool;
    pool.erase(std::remove(pool.begin(), pool.end(), x.get()), pool.end());
  }
  HoldBuffers(*t, false);
  for (RingBuffer& b : t->buffers) GiveBuffer(b);
  t->phase = Phase::kFinished;
  t->times.finished = RuntimeClock::now();
  t->src_disk.reset();
  t->dst_disk.reset();  // removes the temporary file unless committed
  if (status.ok()) {
    ++stats.transfers_completed;
  } else if (absl::IsCancelled(status)) {
    ++stats.transfers_cancelled;
  } else {
    ++stats.transfers_failed;
    // A client can fail transfers at will (a missing file, a bad layout):
    // its strings are escaped and its lines limited per error code.
    static LogLimiter limiter(20, std::chrono::seconds(10));
    if (const auto v = limiter.Allow(absl::StatusCodeToString(status.code())); v.log) {
      if (v.suppressed) {
        spdlog::warn("suppressed {} similar 'transfer failed' lines", v.suppressed);
      }
      spdlog::warn("transfer {} failed: {}", t->id, ForLog(status.ToString(), 512));
    }
  }
  Completion done{t, status};
  {
    absl::MutexLock lock(&t->done_mu);
    t->finished = true;
    t->status = std::move(status);
    t->final_times = t->times;
  }
  active.erase(t->id);
  waiting.erase(std::remove(waiting.begin(), waiting.end(), t), waiting.end());
  AdmitWaiting();
  // Its XDs left the pools, which makes no other XD runnable; a stopping
  // worker waits for an empty pool, though.
  if (stopping) NotifyWorkers();
  drained_cv.SignalAll();
  return done;
}

Completion Runtime::Impl::Abort(const std::shared_ptr<TransferState>& t, Status why) {
  if (why.ok()) why = absl::UnknownError("transfer aborted without a reason");
  if (t->remote && !t->abandoned && t->phase != Phase::kFinished) {
    // Frees what the network channel holds for it and tells the other node.
    t->abandoned = true;
    channels[static_cast<size_t>(t->net_channel)]->AbandonTransfer(t->remote->key, why);
    if (t->relay_channel >= 0 && t->relay_channel != t->net_channel) {
      channels[static_cast<size_t>(t->relay_channel)]->AbandonTransfer(t->remote->key, why);
    }
  }
  if (t->phase == Phase::kWaiting) return Finish(t, std::move(why));
  if (t->phase != Phase::kRunning) return {};
  t->phase = Phase::kDraining;
  t->failure = std::move(why);
  if (t->in_flight == 0) return Finish(t, t->failure);
  // Requests in flight end at the channels' next safe point instead of
  // running to completion (a slow or paced channel could take minutes).
  t->cancelled.store(true, std::memory_order_release);
  for (const auto& x : t->xds) {
    if (!x->remote) channels[x->channel]->Interrupt();
  }
  return {};
}

void Runtime::Impl::Cancel(const std::shared_ptr<TransferState>& t) {
  AbortNow(t, absl::CancelledError(StrCat("transfer ", t->id, " was cancelled")));
}

void Runtime::Impl::AbortNow(const std::shared_ptr<TransferState>& t, Status why) {
  Completion c;
  {
    absl::MutexLock lock(&mu);
    c = Abort(t, std::move(why));
  }
  c.Run();
}

}  // namespace isometry
