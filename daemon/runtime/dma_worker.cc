// Runtime::Impl, the DMA workers (Isometry §3.5): one thread per channel
// that picks the highest-priority runnable XD of its pool, issues its next
// chunk as one request (program + endpoints) and accounts for it when the
// channel completes it; the inline latency path, which runs a small
// direct copy on the submitting thread; and between the two, a small
// one-chunk copy that the submitting thread issues to its channel itself
// when the worker would pick it next.
#include <algorithm>
#include <limits>

#include "channels/cma/client_process.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {
namespace {

using Phase = TransferState::Phase;

// Whether chunk x.next may be issued now (under the runtime lock).
bool Runnable(const XdState& x) {
  const TransferState& t = *x.transfer;
  if (t.phase != Phase::kRunning || x.next >= t.grid->count()) return false;
  const uint64_t k = x.next;
  // Copy dependency. The network hop's receiving half needs no check
  // here: data arrival gates it inside its channel.
  if (x.hop > 0 && !t.xds[x.hop - 1]->remote && !t.xds[x.hop - 1]->done[k]) return false;
  // A free output slot. The sending half's slot is on the other node:
  // the receiver's credits gate it inside the channel.
  if (x.hop + 1 < t.xds.size() && !t.xds[x.hop + 1]->remote) {
    const uint64_t slots = static_cast<uint64_t>(t.buffers[x.hop].slots);
    if (k >= slots && !t.xds[x.hop + 1]->done[k - slots]) return false;
  }
  return true;
}

// The bytes of chunk x.next, which a Runnable XD issues next.
uint64_t NextChunkBytes(const XdState& x) {
  const TransferState& t = *x.transfer;
  return t.grid->chunk(x.next).volume() * t.src.shape.fields.total_bytes();
}

// One end of an XD's request for chunk k: the end as the compiler sees it
// (slots, staging and the network: their shape alone) and where its bytes
// are (host memory, a file, the network).
struct ChunkEnd {
  Endpoint where;
  const InstanceRef* user = nullptr;  // the copy's own end; null: a slot, staging, the network
  InstanceShape slot;                 // the shape of the latter

  CopyEnd end() const { return user ? user->end() : CopyEnd{slot}; }
};

// Moves an endpoint `by` bytes forward: a program compiled from a form is
// relative to the lowest byte it touches (ChunkProgram's shifts).
void Advance(Endpoint& e, uint64_t by) {
  if (auto* h = std::get_if<HostBytes>(&e)) h->base += by;
  if (auto* f = std::get_if<FileRange>(&e)) f->offset += by;
  if (auto* p = std::get_if<ProcessBytes>(&e)) p->address += by;
  if (auto* d = std::get_if<DeviceBytes>(&e)) d->address += by;
}

// Chunk k as it crosses the network at hop h: dense in the receiving
// side's layout.
ChunkEnd Wire(const TransferState& t, size_t h, const Box& chunk, uint64_t k) {
  InstanceShape s{chunk, t.src.shape.fields, t.path().nodes[h + 1].layout};
  const bool out = t.remote->relays() && h == t.remote->relay_hop;
  return {NetHalf{t.remote->key, k, out ? t.remote->relay_peer : t.remote->peer}, nullptr,
          std::move(s)};
}

ChunkEnd SlotOf(const TransferState& t, const RingBuffer& b, const Box& chunk, uint64_t k) {
  InstanceShape s{chunk, t.src.shape.fields, b.layout};
  const uint64_t at = (k % static_cast<uint64_t>(b.slots)) * b.slot_bytes;
  if (b.device >= 0) {  // an FBM ring: `data` is a device address
    return {DeviceBytes{b.device, reinterpret_cast<uint64_t>(b.data) + at}, nullptr, std::move(s)};
  }
  return {HostBytes{b.data + at}, nullptr, std::move(s)};
}

// A user's end: a PROCESS instance by its pinned process, else host bytes.
Endpoint UserEnd(const InstanceRef& ref) {
  if (ref.process) {
    ProcessBytes p = ref.process->At(ref.address);
    p.own_hops = ref.own_hops.get();
    return p;
  }
  return HostBytes{ref.base};
}

ChunkEnd InputOf(const TransferState& t, size_t hop, const Box& chunk, uint64_t k) {
  if (t.remote && !t.remote->sending && hop == t.remote->net_hop) return Wire(t, hop, chunk, k);
  if (hop == 0) {
    if (t.src_disk) return {t.src_disk->Ref(t.src.file_offset), &t.src};
    return {UserEnd(t.src), &t.src};
  }
  return SlotOf(t, t.buffers[hop - 1], chunk, k);
}

ChunkEnd OutputOf(const TransferState& t, size_t hop, const Box& chunk, uint64_t k) {
  if (t.remote && ((t.remote->sending && hop == t.remote->net_hop) ||
                   (t.remote->relays() && hop == t.remote->relay_hop))) {
    return Wire(t, hop, chunk, k);
  }
  if (hop + 1 == t.xds.size()) {
    if (t.dst_disk) return {t.dst_disk->Ref(t.dst.file_offset), &t.dst};
    return {UserEnd(t.dst), &t.dst};
  }
  return SlotOf(t, t.buffers[hop], chunk, k);
}

// The request's program for `chunk`, its ends moved to where the program
// starts.
Result<std::shared_ptr<const CopyProgram>> ProgramFor(ChunkCompiler& compiler, ChunkEnd& in,
                                                      ChunkEnd& out, const Box& chunk) {
  ISO_ASSIGN_OR_RETURN(ChunkProgram c, compiler.Get(in.end(), out.end(), chunk));
  Advance(in.where, c.src_shift);
  Advance(out.where, c.dst_shift);
  return c.program;
}

// Moves `x` behind the other XDs of its priority, and its share's (its
// session's) XDs behind the other shares': equal priorities take turns
// request by request, by share and within a share by transfer, so one
// transfer of slow requests (a layout change forced onto a disk hop)
// cannot hold a channel for its whole length, nor a session with many
// transfers take a share per transfer, while another of the same priority
// waits. Higher priorities still always go first.
void RotateAmongEquals(std::vector<XdState*>& pool, XdState* x) {
  const int priority = x->transfer->options.priority;
  const uint64_t share = x->transfer->share;
  auto at = std::find(pool.begin(), pool.end(), x);
  auto begin = at;
  while (begin != pool.begin() && (*(begin - 1))->transfer->options.priority == priority) --begin;
  auto end = at + 1;
  while (end != pool.end() && (*end)->transfer->options.priority == priority) ++end;
  std::rotate(at, at + 1, end);
  std::stable_partition(begin, end,
                        [share](const XdState* c) { return c->transfer->share != share; });
}

}  // namespace

Histogram& DmaWorker::WaitOf(int priority) {
  auto at = std::find_if(waits.begin(), waits.end(),
                         [priority](const auto& w) { return w.first <= priority; });
  if (at != waits.end() && at->first == priority) return *at->second;
  if (waits.size() + 1 >= kMaxWaitPriorities) {
    // Full: the last entry is kOtherPriorities (the lowest int), made once.
    if (waits.back().first != kOtherPriorities) {
      waits.emplace_back(kOtherPriorities, std::make_unique<Histogram>(kSecondsBounds));
    }
    return *waits.back().second;
  }
  return *waits.insert(at, {priority, std::make_unique<Histogram>(kSecondsBounds)})->second;
}

// ---- picking by class (qos_scheduler.h) ----

XdState* Runtime::Impl::PickXd(DmaWorker& w, RuntimeClock::time_point now,
                               RuntimeClock::time_point& wake, bool& express) {
  // Every slot taken: only a small chunk may go, on the express lane.
  express = w.in_flight >= w.max_in_flight;
  if (express && (!w.express_lane || w.express_in_flight > 0)) return nullptr;
  auto may_go = [express](const XdState& c) {
    return Runnable(c) && (!express || NextChunkBytes(c) <= kExpressRequestBytes);
  };
  if (qos->trivial) {  // one class, no caps: the pool's order alone
    for (XdState* c : w.pool) {
      if (may_go(*c)) return c;
    }
    return nullptr;
  }
  // Each class's first runnable XD (its highest priority); of those, the
  // class with the smallest start tag goes.
  std::fill(w.qos.seen.begin(), w.qos.seen.end(), 0);
  XdState* best = nullptr;
  double best_tag = 0;
  for (XdState* c : w.pool) {
    const size_t k = c->transfer->qos;
    if (w.qos.seen[k] || !may_go(*c)) continue;
    w.qos.seen[k] = 1;
    if (w.qos.HeldBack(k, qos->classes[k].per_channel[w.channel], now, wake)) continue;
    const double tag = w.qos.StartTag(k);
    if (!best || tag < best_tag) {
      best = c;
      best_tag = tag;
    }
  }
  // A class with nothing runnable is not being held back.
  for (size_t k = 0; k < w.qos.seen.size(); ++k) {
    if (!w.qos.seen[k]) w.qos.HeldBack(k, QosLimits{}, now, wake);
  }
  return best;
}

// Whether a class other than `own` has a runnable XD on `w` and nothing
// in flight there: it waits for a slot, and by its tag it would most
// likely get the next one, so the worker looks at the first completion
// rather than once half of its requests are back.
bool Runtime::Impl::OtherClassWaits(const DmaWorker& w, size_t own) const {
  if (qos->trivial) return false;
  for (const XdState* c : w.pool) {
    const size_t k = c->transfer->qos;
    if (k != own && w.qos.shares[k].in_flight == 0 && Runnable(*c)) return true;
  }
  return false;
}

// ---- the inline latency path ----

// Constant-data check: a direct copy of one chunk, no larger than
// inline_bytes, on a channel that can run it on this thread.
bool Runtime::Impl::RunsInline(const TransferState& t) const {
  if (config.inline_bytes == 0 || t.xds.size() != 1 || t.grid->count() != 1) return false;
  const Channel& ch = *channels[t.xds[0]->channel];
  return ch.caps().runs_inline &&
         t.box.volume() * t.src.shape.fields.total_bytes() <= config.inline_bytes;
}

Completion Runtime::Impl::RunInline(const std::shared_ptr<TransferState>& t) {
  const Box chunk = t->grid->chunk(0);
  ChunkEnd in{UserEnd(t->src), &t->src}, out{UserEnd(t->dst), &t->dst};
  auto program = ProgramFor(compiler, in, out, chunk);
  Status s = program.ok() ? channels[t->xds[0]->channel]->RunInline(
                                {*program, std::move(in.where), std::move(out.where)})
                          : program.status();
  absl::MutexLock lock(&mu);
  DmaWorker& w = *workers[t->xds[0]->channel];
  // It ran at once: dispatched when submitted (one clock read fewer).
  t->times.first_dispatch = t->times.submitted;
  ++stats.transfers_inline;
  // Not put in `active`: it ends here, under this lock (Finish).
  if (s.ok()) {
    t->xds[0]->done[0] = 1;
    t->xds[0]->done_count = 1;
    ++w.requests_done;
    w.bytes_done += (*program)->bytes;
  } else if (!absl::IsCancelled(s)) {
    ++w.errors;
  }
  return Finish(t, std::move(s));
}

// ---- issued by the submitting thread ----

// Constant-data check: a one-hop local copy of one chunk small enough for
// its channel's express lane (memcpy, cma).
bool Runtime::Impl::IssuesAtOnce(const TransferState& t) const {
  if (t.remote || t.xds.size() != 1 || t.grid->count() != 1) return false;
  return channels[t.xds[0]->channel]->caps().express &&
         t.box.volume() * t.src.shape.fields.total_bytes() <= kExpressRequestBytes;
}

// `t` was admitted without waking its DMA worker (Runtime::Copy): when the
// worker would pick its chunk next, it goes from here, which spares the
// worker's wake-up and the hand-off to it (two context switches on the
// small copy's path, and the CPU time of both on a busy machine); else the
// worker is woken as for any admission.
void Runtime::Impl::IssueAtOnce(TransferState& t) {
  XdState* x = t.xds[0].get();
  DmaWorker& w = *workers[x->channel];
  const auto now = RuntimeClock::now();
  auto wake = RuntimeClock::time_point::max();
  bool express = false;
  if (PickXd(w, now, wake, express) == x) {
    Issue(w, x, express, now);
    return;
  }
  w.cv.SignalAll();
}

// Issues what `w` would issue now, on this thread (a request's end made
// it runnable: OnRequestDone), at most kIssuedHere requests; the worker
// is woken for the rest, or for a class its rate cap lets go later.
void Runtime::Impl::IssueReady(DmaWorker& w) {
  constexpr int kIssuedHere = 4;
  for (int i = 0; i < kIssuedHere; ++i) {
    const auto now = RuntimeClock::now();
    auto wake = RuntimeClock::time_point::max();
    bool express = false;
    XdState* x = PickXd(w, now, wake, express);
    if (!x) {
      if (wake != RuntimeClock::time_point::max()) w.cv.SignalAll();
      return;
    }
    Issue(w, x, express, now);
  }
  w.cv.SignalAll();
}

// Whether `w` has a chunk to issue now, or a class whose rate cap will let
// it go at a known time (its worker then waits with a timeout).
bool Runtime::Impl::WorkerMayIssue(DmaWorker& w) {
  auto wake = RuntimeClock::time_point::max();
  bool express = false;
  return PickXd(w, RuntimeClock::now(), wake, express) != nullptr ||
         wake != RuntimeClock::time_point::max();
}

// ---- the DMA worker ----

void Runtime::Impl::WorkerLoop(DmaWorker& w) {
  // Locked by hand: the lock is dropped around Submit (a channel may
  // complete on its own thread at once, and OnRequestDone takes it).
  mu.Lock();
  while (true) {
    if (stopping && w.pool.empty() && w.in_flight == 0 && w.elsewhere == 0 &&
        w.express_in_flight == 0) {
      break;
    }
    const auto now = RuntimeClock::now();
    auto wake = RuntimeClock::time_point::max();
    bool express = false;
    XdState* x = PickXd(w, now, wake, express);
    if (!x) {
      if (wake == RuntimeClock::time_point::max()) {
        w.cv.Wait(&mu);
      } else {  // a class paced by its rate cap may go then
        w.cv.WaitWithTimeout(&mu, absl::FromChrono(wake - now));
      }
      continue;
    }
    Issue(w, x, express, now);
  }
  mu.Unlock();
}

// Issues chunk x->next of `x`, which PickXd chose (`express`: on the
// express lane), on this thread: the DMA worker's, or the submitting
// one's (IssueAtOnce). Takes its slot and the class's charge under the
// lock, then drops the lock to compile the program and hand the request
// to the channel (which may complete it at once: OnRequestDone locks),
// and takes it again before it returns.
void Runtime::Impl::Issue(DmaWorker& w, XdState* x, bool express, RuntimeClock::time_point now) {
  TransferState& t = *x->transfer;
  std::shared_ptr<TransferState> keep = active.at(t.id);
  RotateAmongEquals(w.pool, x);
  const uint64_t k = x->next++;
  ++x->in_flight;
  ++t.in_flight;
  ++(express ? w.express_in_flight : w.in_flight);
  ++w.dispatch_seq;
  if (!t.dispatched) {
    t.dispatched = true;
    t.times.first_dispatch = RuntimeClock::now();
    t.times.dispatch_seq_at_first = w.dispatch_seq;
  }
  if (x == &FirstLocalXd(t)) t.times.dispatch_seq_at_last = w.dispatch_seq;
  if (k == 0) {
    const double waited = std::chrono::duration<double>(now - x->ready).count();
    w.WaitOf(t.options.priority).Observe(waited);
    class_wait[t.qos]->Observe(waited);
  }
  const Box chunk = t.grid->chunk(k);
  // Counted with one class too: its bytes and share are reported, and a
  // reload that brings classes finds the counts in flight right.
  const QosLimits& limits = qos->classes[t.qos].per_channel[w.channel];
  w.qos.Charge(t.qos, limits, chunk.volume() * t.src.shape.fields.total_bytes(), now);
  const uint32_t weight = limits.weight;
  const int nice = limits.nice;
  ChunkEnd in = InputOf(t, x->hop, chunk, k);
  ChunkEnd out = OutputOf(t, x->hop, chunk, k);
  const bool stream = StreamsChunk(*x, k);
  mu.Unlock();

  auto program = ProgramFor(compiler, in, out, chunk);
  if (!program.ok()) {
    OnRequestDone(keep, x, k, 0, false, express, program.status());
    mu.Lock();
    return;
  }
  const uint64_t bytes = (*program)->bytes;
  ChannelRequest request{*program,
                         std::move(in.where),
                         std::move(out.where),
                         t.options.priority,
                         &t.cancelled,
                         stream,
                         static_cast<uint32_t>(t.qos),
                         weight,
                         nice};
  Channel& channel = *channels[w.channel];
  // A request the channel hands outside its threads (a client's own
  // hop, waiting on that client) gives its slot back before it is
  // submitted: it may complete at once, and must not hold a slot that
  // other sessions' requests need while it waits (a client that never
  // answers would stall every copy on the channel).
  const bool elsewhere = channel.RunsElsewhere(request);
  if (elsewhere) {
    mu.Lock();
    --(express ? w.express_in_flight : w.in_flight);
    ++w.elsewhere;
    if (w.qos.shares[t.qos].in_flight > 0) --w.qos.shares[t.qos].in_flight;  // nor a class's cap
    mu.Unlock();
  }
  channel.Submit(std::move(request),
                 [this, keep, x, k, bytes, elsewhere, express](const Status& s) {
                   OnRequestDone(keep, x, k, bytes, elsewhere, express, s);
                 });
  mu.Lock();
}

// Streaming stores: the user's destination of a large local copy, and the
// rings its hops write where that has been faster (ring_stores.h), on a
// channel that honours the hint (memcpy; the others ignore it). A ring
// whose pace is timed (TimesRing) takes the chooser's next pick at the
// first chunk of each epoch, and remembers it for the epoch's timing;
// others its present preference.
bool Runtime::Impl::StreamsChunk(XdState& x, uint64_t k) {
  const TransferState& t = *x.transfer;
  if (!t.stream_last_hop) return false;
  if (x.hop == t.last_hop) return true;
  if (t.remote || !channels[x.channel]->caps().streams_stores) return false;
  bool stream = ring_stores.Prefers();
  if (!x.streamed.empty()) {
    const uint64_t epoch = k / RingStores::kEpochChunks;
    if (k % RingStores::kEpochChunks == 0) x.streamed[epoch] = ring_stores.NextStreams() ? 1 : 0;
    stream = x.streamed[epoch] != 0;
  }
  if (stream) ++stats.ring_requests_streamed;
  return stream;
}

// `x`, which reads a timed ring (TimesRing), finished a chunk: each time
// its finished chunks make up one more epoch, the time since the last
// such moment is what that epoch's bytes took, and goes to the way its
// chunks were written (ring_stores.h). The first epoch has no start to
// time from; a last, partial one is not timed.
void Runtime::Impl::ObserveRingEpoch(XdState& x) {
  if (x.hop == 0 || x.done_count % RingStores::kEpochChunks != 0) return;
  const TransferState& t = *x.transfer;
  const XdState& writer = *t.xds[x.hop - 1];
  if (writer.streamed.empty()) return;
  const auto now = RuntimeClock::now();
  const uint64_t epoch = x.done_count / RingStores::kEpochChunks - 1;
  if (epoch > 0) {
    const double bytes = static_cast<double>(RingStores::kEpochChunks) *
                         static_cast<double>(t.grid->full_chunk().volume()) *
                         static_cast<double>(t.src.shape.fields.total_bytes());
    const double ns = std::chrono::duration<double, std::nano>(now - x.epoch_mark).count();
    ring_stores.Observe(writer.streamed[epoch] != 0, ns / bytes);
  }
  x.epoch_mark = now;
}

// After a request of `x` ended (OnRequestDone, under the lock): wakes the
// workers that may have new work, or lists in `ready` those whose chunks
// the ending thread issues itself.
void Runtime::Impl::WakeAfter(const TransferState& t, const XdState& x, bool express,
                              bool class_capped, ReadyWorkers& ready) {
  DmaWorker& w = *workers[x.channel];
  // Only this transfer's channels can have new work (a free slot, a
  // finished dependency, room in flight); waking every worker on every
  // request costs more than the request on fast channels. A transfer
  // that has just finished has no XD left in any pool: only this
  // channel's room in flight is new, for other transfers' XDs.
  // This channel's own worker is woken once half its requests in flight
  // have come back, not after each: while the rest are queued its
  // threads have work, and each wake-up of the worker took a copy
  // thread's core for two context switches and a dispatch, leaving copy
  // threads idle between requests (docs/benchmarks/design-measurements.md,
  // "Wake-ups").
  // Whatever else the completion enabled is issued on that wake-up;
  // a higher-priority XD waiting in the pool (priority first) is issued
  // at once, as before.
  const bool higher_waits =
      !w.pool.empty() && w.pool.front()->transfer->options.priority > t.options.priority;
  // A class at its cap may go again now: its worker looks at once.
  // The express lane's request frees the lane: another small chunk may go.
  // A class waiting with nothing in flight here goes at once too (its
  // scan of the pool last: only when nothing else decided).
  const bool own_has_work = !express && w.in_flight > w.max_in_flight / 2 && !higher_waits &&
                            !class_capped && !OtherClassWaits(w, t.qos);
  if (t.phase != Phase::kFinished) {
    for (const auto& xd : t.xds) {
      if (xd->remote || (xd->channel == x.channel && own_has_work)) continue;
      DmaWorker* other = workers[xd->channel].get();
      // Its next chunk goes from this thread (IssueReady) rather than
      // from its worker, woken for it, where the channel only queues
      // what it is handed (memcpy): in a pipeline each chunk's end makes
      // the next hop's chunk runnable, and that wake-up cost a context
      // switch each way per chunk.
      if (channels[xd->channel]->caps().queues_only) {
        if (std::find(ready.begin(), ready.end(), other) == ready.end()) ready.push_back(other);
      } else {
        other->cv.SignalAll();
      }
    }
  } else if (!w.pool.empty() && !own_has_work && WorkerMayIssue(w)) {
    // Not when nothing in the pool may go: with every slot taken by a
    // bulk class, each small copy that ends on the express lane woke
    // the worker for nothing.
    w.cv.SignalAll();
  }
}

void Runtime::Impl::OnRequestDone(const std::shared_ptr<TransferState>& t, XdState* x, uint64_t k,
                                  uint64_t bytes, bool elsewhere, bool express, const Status& s) {
  Completion c;
  bool commit = false;
  ReadyWorkers ready;  // workers whose chunks go from this thread
  {
    absl::MutexLock lock(&mu);
    DmaWorker& w = *workers[x->channel];
    --(elsewhere ? w.elsewhere : express ? w.express_in_flight : w.in_flight);
    // Charged at dispatch (WorkerLoop); a request handed elsewhere gave
    // its count back then.
    QosShare& share = w.qos.shares[t->qos];
    if (!elsewhere && share.in_flight > 0) --share.in_flight;
    const bool class_capped =
        qos->classes[t->qos].per_channel[x->channel].in_flight != std::numeric_limits<int>::max();
    --x->in_flight;
    --t->in_flight;
    if (s.ok()) {
      x->done[k] = 1;
      ++x->done_count;
      if (k == 0 && x->hop + 1 < t->xds.size()) t->xds[x->hop + 1]->ready = RuntimeClock::now();
      ++w.requests_done;
      w.bytes_done += bytes;
      ObserveRingEpoch(*x);
      if (t->phase == Phase::kRunning && t->xds[t->last_hop]->done_count == t->grid->count()) {
        if (t->dst_disk) {
          commit = true;  // fdatasync + rename, outside the lock
        } else {
          c = Finish(t, OkStatus());
        }
      }
    } else if (!absl::IsCancelled(s)) {
      ++w.errors;
    }
    if (!s.ok() && t->phase == Phase::kRunning) {
      const TopologyEdge& e = t->path().edges[x->hop];
      const RemotePart* remote = t->remote ? &*t->remote : nullptr;
      // A half of a cross-node copy: the copy's id, and the channel by its
      // name here ("tcp:b"; the joined graph calls every link "tcp").
      const uint64_t id = remote && remote->copy_id ? remote->copy_id : t->id;
      const std::string& channel =
          x->channel < config.channels.size() ? config.channels[x->channel].name : e.channel_name;
      c = Abort(t, Status(s.code(),
                          StrCat("transfer ", id, ", hop ", x->hop, " (", MemoryName(e.src, remote),
                                 " -> ", MemoryName(e.dst, remote), " on channel '", channel,
                                 "'), chunk ", k, ": ", s.message())));
    }
    if (t->phase == Phase::kDraining && t->in_flight == 0) c = Finish(t, t->failure);
    WakeAfter(*t, *x, express, class_capped, ready);
  }
  if (!ready.empty()) {
    absl::MutexLock lock(&mu);
    for (DmaWorker* r : ready) IssueReady(*r);
  }
  if (commit) {
    // Every chunk is written; no request of this transfer is in flight.
    Status durable = t->dst_disk->Commit(t->options.durable);
    absl::MutexLock lock(&mu);
    c = Finish(t, durable.ok() ? durable
                               : Status(durable.code(),
                                        StrCat("transfer ", t->id, ": ", durable.message())));
  }
  c.Run();
}

}  // namespace isometry
