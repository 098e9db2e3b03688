#include "client/cpp/direct_read.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

#include "client/cpp/client_impl.h"
#include "layout/hop_window.h"
#include "procmem/cma_copy.h"
#include "procmem/cma_gather.h"

namespace isometry::client {
namespace {

// Whether a copy read run by run is shared by two threads.
bool SplitsBatches(const DirectLease& lease) {
  const CopyProgram& p = lease.program;
  return p.bytes >= kSplitBytes && p.runs > 0 && p.bytes / p.runs >= kSplitMinRun;
}

CmaTarget TargetOf(const DirectLease& lease) {
  CmaTarget target;
  target.pid = lease.pid;
  target.pidfd = lease.pidfd.get();
  target.remote_base = lease.remote_address;
  target.local_base = lease.local;
  target.direction = CmaDirection::kRead;
  target.channel = "direct read";
  return target;
}

// A client reads with its own rights: the pidfd after each call is the
// check that matters (CmaLimits::check_before). Large copies come in two
// or more batches, so that a helper thread can take half.
CmaLimits LimitsOf(const DirectLease& lease) {
  CmaLimits limits;
  limits.check_before = false;
  const uint64_t half = (lease.program.bytes + 1) / 2;
  if (SplitsBatches(lease)) {
    limits.batch_bytes = std::clamp<uint64_t>(half, 64 << 10, limits.batch_bytes);
  }
  return limits;
}

// Records of a lease's response, decoded.
Result<CopyProgram> Decoded(const std::string& records, uint64_t ops) {
  return hop_window::DecodeProgram(reinterpret_cast<const std::byte*>(records.data()), ops,
                                   records.size());
}

// Whether `p` reads only inside [0, src_limit) and writes only inside
// [0, dst_limit) of its bases.
bool Inside(const CopyProgram& p, uint64_t src_limit, uint64_t dst_limit) {
  const std::optional<hop_window::Span> src = hop_window::SideSpan(p, true);
  const std::optional<hop_window::Span> dst = hop_window::SideSpan(p, false);
  return src && dst && src->lo >= 0 && dst->lo >= 0 && src->hi <= src_limit && dst->hi <= dst_limit;
}

// A staged lease's pieces, checked as the program is: piece k moves its
// bytes of the stream, reads only the slot's first bytes and writes inside
// [0, dst_span).
Result<std::vector<CopyProgram>> CheckedPieces(const v1::DirectReadResponse& r) {
  const uint64_t piece = r.piece_bytes();
  if (piece == 0 || r.unpack_ops_size() != r.unpack_programs_size() ||
      static_cast<uint64_t>(r.unpack_programs_size()) != (r.bytes() + piece - 1) / piece) {
    return Internal("isometryd sent a staged lease whose pieces do not cover its stream");
  }
  std::vector<CopyProgram> out;
  for (int k = 0; k < r.unpack_programs_size(); ++k) {
    ISO_ASSIGN_OR_RETURN(CopyProgram p, Decoded(r.unpack_programs(k), r.unpack_ops(k)));
    const uint64_t at = static_cast<uint64_t>(k) * piece;
    const uint64_t len = std::min(piece, r.bytes() - at);
    if (p.bytes != len || !Inside(p, len, r.dst_span())) {
      return Internal("isometryd sent a staged lease whose piece ", k, " reaches outside its ends");
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const DirectLease>> CheckedLease(const v1::DirectReadResponse& r,
                                                        UniqueFd pidfd, uint64_t own_begin,
                                                        uint64_t own_end,
                                                        std::shared_ptr<ServedWindow> window) {
  const auto bad = [](const auto&... why) {
    return Internal("isometryd sent a direct read lease that ", why...);
  };
  if (!pidfd.valid() || r.pid() <= 0) return bad("names no process");
  auto lease = std::make_shared<DirectLease>();
  ISO_ASSIGN_OR_RETURN(lease->program, Decoded(r.program(), r.program_ops()));
  if (lease->program.bytes != r.bytes()) return bad("moves ", lease->program.bytes, " bytes");
  const bool staged = r.unpack_programs_size() > 0;
  // A staged program writes stream positions, which only its pieces place.
  if (!Inside(lease->program, r.src_span(), staged ? r.bytes() : r.dst_span())) {
    return bad("reaches outside its ends");
  }
  std::vector<CopyProgram> pieces;
  if (staged) {
    ISO_ASSIGN_OR_RETURN(pieces, CheckedPieces(r));
    // Without the publisher's window nothing can run it here.
    if (!window) return FailedPrecondition("no serve window for a staged lease");
  }
  const uint64_t local = r.local_address();
  if (local < own_begin || local > own_end || r.dst_span() > own_end - local) {
    return bad("writes outside this session's range");
  }
  lease->pid = static_cast<pid_t>(r.pid());
  lease->pidfd = std::move(pidfd);
  lease->remote_address = r.remote_address();
  // This process's own address, which the daemon computed from the range
  // this session registered.
  lease->local = reinterpret_cast<std::byte*>(  // NOLINT(performance-no-int-to-ptr)
      static_cast<uintptr_t>(local));
  lease->epoch = r.epoch();
  const std::optional<ProgramExtent> extent = SourceExtent(lease->program);
  lease->gather = extent && GatherPays(lease->program.runs, extent->end - extent->begin);
  if (lease->gather && extent->end - extent->begin >= kSplitBytes) {
    lease->halves = SplitProgram(lease->program);
    if (lease->halves.size() != 2) lease->halves.clear();
  }
  if (staged) {
    auto served = MakeStagedServedProgram(lease->program, pieces, r.piece_bytes(),
                                          lease->remote_address, lease->local);
    if (!served) return bad("has pieces no lane can serve");
    lease->served = std::move(*served);
    lease->served_window = std::move(window);
    lease->staged = true;
    return std::shared_ptr<const DirectLease>(std::move(lease));
  }
  if (window) {
    if (auto served = MakeServedProgram(lease->program, lease->remote_address, lease->local)) {
      lease->served = std::move(*served);
      lease->served_window = std::move(window);
      if (lease->program.runs <= kTimedReadRuns && lease->program.bytes < kTimedReadBytes) {
        lease->ways = std::make_unique<DirectLease::ReadWays>();
      }
    }
  }
  if (!lease->gather && lease->program.runs <= kMaxMemoRuns) {
    lease->batches = BuildCmaBatches(lease->program, TargetOf(*lease), LimitsOf(*lease));
  }
  return std::shared_ptr<const DirectLease>(std::move(lease));
}

namespace {

Status KernelRead(const DirectLease& lease, DirectHelper* helper) {
  const CmaTarget target = TargetOf(lease);
  const CmaLimits limits = LimitsOf(lease);
  if (lease.gather) {
    if (helper && !lease.halves.empty()) {
      const std::function<Status(size_t)> half = [&](size_t i) {
        const CopyProgram& p = lease.halves[i];
        std::optional<Status> gathered = TryGatherRead(p, target, nullptr);
        return gathered ? *gathered : CmaCopy(p, target, nullptr, limits);
      };
      if (std::optional<Status> s = helper->Split(half)) return *s;
    }
    if (std::optional<Status> gathered = TryGatherRead(lease.program, target, nullptr)) {
      return *gathered;
    }
  }
  if (!lease.batches) return CmaCopy(lease.program, target, nullptr, limits);
  const CmaBatches& b = *lease.batches;
  if (helper && b.batches.size() > 1 && SplitsBatches(lease)) {
    const std::function<Status(size_t)> half = [&](size_t first) {
      return IssueCmaBatches(b, target, first, 2, limits);
    };
    if (std::optional<Status> s = helper->Split(half)) return *s;
  }
  return IssueCmaBatches(b, target, 0, 1, limits);
}

// One copy of a lease of few runs, the way its timing says (ReadWays).
// A copy the publisher did not serve reads the kernel's way, untimed.
Status TimedRead(const DirectLease& lease, DirectLease::ReadWays& ways, DirectHelper* helper,
                 uint32_t spin_us) {
  constexpr int kServed = 0;  // 1: the kernel's way
  int way;
  {
    std::lock_guard lock(ways.mu);
    way = ways.choice.Next();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Status> s;
  if (way == kServed) {
    s = lease.served_window->Copy(*lease.served, lease.pidfd.get(), spin_us);
    if (!s) return KernelRead(lease, helper);
  } else {
    s = KernelRead(lease, helper);
  }
  if (s->ok()) {
    const auto took = std::chrono::steady_clock::now() - t0;
    std::lock_guard lock(ways.mu);
    ways.choice.Took(way, lease.program.bytes, took);
  }
  return *s;
}

}  // namespace

Status RunDirectRead(const DirectLease& lease, DirectHelper* helper, uint32_t spin_us) {
  // Through the window whenever it can run, but for leases of few runs
  // (ReadWays), timed both ways. Probing the kernel's way of a fragmented
  // type cost more than it could save (one probe costs many served
  // copies), and under load served copies kept pace with the kernel's
  // (docs/benchmarks/design-measurements.md, "Direct and served reads").
  if (lease.served_window && lease.served->usable.load(std::memory_order_relaxed)) {
    if (lease.ways) return TimedRead(lease, *lease.ways, helper, spin_us);
    if (std::optional<Status> s =
            lease.served_window->Copy(*lease.served, lease.pidfd.get(), spin_us)) {
      return *s;
    }
  }
  if (lease.staged) return Unavailable("the publisher did not serve this staged copy");
  return KernelRead(lease, helper);
}

DirectHelper::~DirectHelper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<Status> DirectHelper::Split(const std::function<Status(size_t)>& work) {
  std::unique_lock use(use_, std::try_to_lock);
  if (!use.owns_lock()) return std::nullopt;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    std::lock_guard lock(mu_);
    job_ = &work;
    done_.reset();
  }
  cv_.notify_all();
  const Status mine = work(0);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return done_.has_value(); });
  return mine.ok() ? *done_ : mine;
}

void DirectHelper::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || job_ != nullptr; });
    if (stop_) return;
    const std::function<Status(size_t)>* job = std::exchange(job_, nullptr);
    lock.unlock();
    Status s = (*job)(1);
    lock.lock();
    done_ = std::move(s);
    cv_.notify_all();
  }
}

// ---- the session's leases (Client::Impl, client_impl.h) ----

namespace {
// Leases kept per session: past it they are all dropped and asked again.
constexpr size_t kMaxLeases = 4096;
}  // namespace

std::optional<Completion> Client::Impl::TryDirect(uint64_t src, uint64_t dst) {
  if (!want_direct_reads) return std::nullopt;
  std::shared_ptr<const DirectLease> lease;
  std::pair<uint64_t, uint64_t> own;
  {
    std::lock_guard lock(direct_mu);
    const auto s = private_instances.find(src), d = private_instances.find(dst);
    if (s == private_instances.end() || d == private_instances.end()) return std::nullopt;
    const auto range = own_ranges.find(d->second);
    // A direct read writes this process's memory from another's.
    if (range == own_ranges.end() || own_ranges.count(s->second)) return std::nullopt;
    own = range->second;
    if (auto it = leases.find({src, dst}); it != leases.end()) {
      if (!it->second) return std::nullopt;
      lease = it->second;
    }
  }
  if (!lease) {
    v1::LocalRequest req;
    req.mutable_direct_read()->set_src_instance(src);
    req.mutable_direct_read()->set_dst_instance(dst);
    req.mutable_direct_read()->set_served_reads(want_served_reads);
    std::vector<int> fds;
    Result<v1::LocalResponse> resp = Call(req, &fds);
    std::shared_ptr<ServedWindow> window;
    if (resp.ok() && fds.size() == 1 && resp->direct_read().has_serve()) {
      window = ServedWindowOf(resp->direct_read(), fds[0]);
    }
    Result<std::shared_ptr<const DirectLease>> got =
        resp.ok() && fds.size() == 1 ? CheckedLease(resp->direct_read(), UniqueFd(fds[0]),
                                                    own.first, own.second, std::move(window))
                                     : Result<std::shared_ptr<const DirectLease>>(resp.status());
    if (resp.ok() && fds.size() != 1) CloseAll(fds);
    // Refused (the pair does not qualify) or a bad lease: this pair goes
    // through the daemon from now on. Anything else (an instance gone, a
    // range ended) the daemon's copy reports.
    if (!got.ok() && !absl::IsFailedPrecondition(got.status()) && !absl::IsInternal(got.status())) {
      return std::nullopt;
    }
    std::lock_guard lock(direct_mu);
    if (leases.size() >= kMaxLeases) leases.clear();
    leases[{src, dst}] = got.ok() ? *got : nullptr;
    if (!got.ok()) return std::nullopt;
    lease = *got;
  }
  // Checked before the read too, so that a range known to have ended is
  // not read at all, and after it, for an end during the read.
  const auto revoked = [&] {
    return header->lease_epoch.value.load(std::memory_order_seq_cst) != lease->epoch;
  };
  const Status s =
      revoked() ? absl::CancelledError("revoked")
                : RunDirectRead(*lease, direct_helper.get(), static_cast<uint32_t>(spin.count()));
  if (revoked()) {
    // A range this session leased has ended, maybe during the read: the
    // daemon copies (or says the range ended), and leases are asked anew.
    std::lock_guard lock(direct_mu);
    leases.clear();
    return std::nullopt;
  }
  if (lease->staged && absl::IsUnavailable(s)) return std::nullopt;  // the daemon copies this one
  if (absl::IsPermissionDenied(s)) {
    // The kernel does not let this process read that one (Yama, another
    // uid's ids since): the daemon may, for a client of that uid.
    std::lock_guard lock(direct_mu);
    leases[{src, dst}] = nullptr;
    return std::nullopt;
  }
  if (s.ok()) direct_reads_run.fetch_add(1, std::memory_order_relaxed);
  return Completion{0, s};
}

std::shared_ptr<ServedWindow> Client::Impl::ServedWindowOf(const v1::DirectReadResponse& r,
                                                           int pidfd) {
  if (!want_served_reads) return nullptr;
  const std::pair<int32_t, uint64_t> key{r.pid(), r.serve().token()};
  std::lock_guard lock(served_mu);
  if (auto it = served_windows.find(key); it != served_windows.end()) return it->second;
  Result<std::shared_ptr<ServedWindow>> w =
      ServedWindow::Attach(pidfd, r.serve().fd(), r.serve().bytes(), r.serve().token());
  // Not attached (another uid's pidfd_getfd refused, every lane taken):
  // that publisher's copies read the kernel's way; not asked again.
  if (served_windows.size() >= kMaxLeases) served_windows.clear();
  served_windows[key] = w.ok() ? *w : nullptr;
  return served_windows[key];
}

void Client::Impl::ForgetInstance(uint64_t id) {
  std::lock_guard lock(direct_mu);
  if (private_instances.erase(id) == 0) return;
  for (auto it = leases.begin(); it != leases.end();) {
    it = it->first.first == id || it->first.second == id ? leases.erase(it) : std::next(it);
  }
}

}  // namespace isometry::client
