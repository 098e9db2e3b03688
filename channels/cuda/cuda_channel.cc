#include "channels/cuda/cuda_channel.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "channels/cuda/cuda_lowering.h"
#include "channels/cuda/cuda_pack.h"
#include "channels/cuda/cuda_stream.h"
#include "core/rate_limiter.h"
#include "core/thread_name.h"

namespace isometry::cuda {
namespace {

// Where one request reads and writes, resolved from its endpoints.
struct Ends {
  int device = 0;  // the device whose stream runs the request
  uint64_t src = 0;
  uint64_t dst = 0;
  cudaMemcpyKind kind = cudaMemcpyDefault;
  bool kernel_allowed = false;
};

class CudaChannel final : public Channel {
 public:
  CudaChannel(const ChannelConfig& config, const GpuProbe& probe);
  ~CudaChannel() override;
  CudaChannel(const CudaChannel&) = delete;
  CudaChannel& operator=(const CudaChannel&) = delete;

  // Streams and peer access; the thread starts only when this succeeds.
  Status Start(const GpuProbe& probe);

  const ChannelCaps& caps() const override { return caps_; }
  void Submit(ChannelRequest request, RequestDone done) override;
  void Interrupt() override {
    absl::MutexLock lock(&mu_);
    interrupted_ = true;
  }

 private:
  struct Pending {
    int priority = 0;
    uint64_t seq = 0;
    ChannelRequest request;
    RequestDone done;
  };
  // One in-flight request per slot; slot s uses streams_[device][s].
  struct Slot {
    CudaChannel* channel = nullptr;
    int index = 0;
    bool busy = false;
    int device = 0;
    RequestDone done;
    ChannelRequest request;  // keeps the program alive while it runs
    std::vector<PackOp> table;
    std::vector<DeviceBuffer> device_table;   // per device
    cudaError_t stream_status = cudaSuccess;  // from the callback, under mu_
  };

  static void CUDART_CB OnStreamDone(cudaStream_t stream, cudaError_t status, void* slot);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  bool Work() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Begin(Slot& slot, Pending pending) ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(Slot& slot, Status status) ABSL_LOCKS_EXCLUDED(mu_);
  Result<Ends> Resolve(const ChannelRequest& request) const;
  Status Issue(Slot& slot, const ChannelRequest& request);
  Status IssueCopy(const CudaCopy& c, const Ends& ends, cudaStream_t stream) const;
  Status IssueKernel(Slot& slot, const CudaLowering& l, const Ends& ends, cudaStream_t stream);

  // Constant after construction.
  ChannelCaps caps_;
  std::string what_;  // "gpu_write 'name'" for messages
  std::vector<uint64_t> max_pitch_;
  std::vector<std::vector<bool>> peer_;  // peer_[a][b]: a's kernels reach b's memory
  // Touched by the channel's thread only (and Start before it runs).
  std::vector<std::vector<CudaStream>> streams_;  // [device][slot]
  std::vector<Slot> slots_;                       // size never changes; busy flags under mu_
  // A cap (rate_limit): each request is issued no sooner than the end of
  // the time the one before it booked, so the streams never run ahead of
  // the cap by more than one request.
  std::unique_ptr<RateLimiter> limiter_;
  RateLimiter::Clock::time_point paced_until_{};  // channel's thread only

  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);   // ordered: priority, then seq
  std::vector<int> completed_ ABSL_GUARDED_BY(mu_);  // slots whose stream is done
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last
};

CudaChannel::CudaChannel(const ChannelConfig& config, const GpuProbe& probe) {
  caps_.name = config.name;
  caps_.kind = config.kind;
  const MemoryKind hosts[] = {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm};
  for (MemoryKind h : hosts) {
    if (config.kind == ChannelKind::kGpuWrite) caps_.memory_kinds.emplace_back(h, MemoryKind::kFbm);
    if (config.kind == ChannelKind::kGpuRead) caps_.memory_kinds.emplace_back(MemoryKind::kFbm, h);
  }
  if (config.kind == ChannelKind::kGpuCopy) {
    caps_.memory_kinds.emplace_back(MemoryKind::kFbm, MemoryKind::kFbm);
  }
  caps_.converts_layout = true;
  caps_.request_bytes = config.request_bytes;
  caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : 4;
  caps_.rate_limit_bytes_per_s = config.rate_limit_bytes_per_s;
  if (config.rate_limit_bytes_per_s) {
    limiter_ = std::make_unique<RateLimiter>(config.rate_limit_bytes_per_s);
  }
  what_ = StrCat(ChannelKindName(config.kind), " '", config.name, "'");
  for (const GpuInfo& g : probe.gpus) max_pitch_.push_back(g.max_pitch);
  peer_.assign(probe.gpus.size(), std::vector<bool>(probe.gpus.size(), false));
  slots_.resize(static_cast<size_t>(caps_.max_in_flight));
  for (size_t s = 0; s < slots_.size(); ++s) {
    slots_[s].channel = this;
    slots_[s].index = static_cast<int>(s);
    slots_[s].device_table.resize(probe.gpus.size());
  }
}

Status CudaChannel::Start(const GpuProbe& probe) {
  const int devices = static_cast<int>(probe.gpus.size());
  for (int d = 0; d < devices; ++d) {
    streams_.emplace_back();
    for (size_t s = 0; s < slots_.size(); ++s) {
      ISO_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(d, what_));
      streams_.back().push_back(std::move(stream));
    }
  }
  // Peer access is per context and stays on: another GPUCopy channel may
  // have enabled it already.
  for (int a = 0; a < devices && caps_.kind == ChannelKind::kGpuCopy; ++a) {
    for (int b = 0; b < devices; ++b) {
      if (a == b || !probe.peer_access[static_cast<size_t>(a)][static_cast<size_t>(b)]) continue;
      ISO_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(a), what_, "cudaSetDevice"));
      const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
      if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled) {
        return CudaStatus(err, what_, "cudaDeviceEnablePeerAccess");
      }
      (void)cudaGetLastError();
      peer_[static_cast<size_t>(a)][static_cast<size_t>(b)] = true;
    }
  }
  thread_ = std::thread([this] {
    NameThisThread(StrCat("cuda:", caps_.name));
    Run();
  });
  return OkStatus();
}

CudaChannel::~CudaChannel() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CudaChannel::Submit(ChannelRequest request, RequestDone done) {
  absl::MutexLock lock(&mu_);
  Pending p{request.priority, next_seq_++, std::move(request), std::move(done)};
  // Behind every request of the same or a higher priority.
  auto at = std::find_if(queue_.begin(), queue_.end(),
                         [&](const Pending& q) { return q.priority < p.priority; });
  queue_.insert(at, std::move(p));
}

// Runs on a CUDA thread: no CUDA calls here, only the hand-over. CUDA
// calls it exactly once, with the stream's error if the device failed
// (cudaLaunchHostFunc's functions are skipped then, which would leave the
// request hanging).
void CUDART_CB CudaChannel::OnStreamDone(cudaStream_t, cudaError_t status, void* arg) {
  auto* slot = static_cast<Slot*>(arg);
  absl::MutexLock lock(&slot->channel->mu_);
  slot->stream_status = status;
  slot->channel->completed_.push_back(slot->index);
}

bool CudaChannel::Work() const {
  if (!completed_.empty() || interrupted_) return true;
  if (!queue_.empty() && running_ < caps_.max_in_flight) return true;
  return stopping_ && queue_.empty() && running_ == 0;
}

void CudaChannel::Run() {
  while (true) {
    std::vector<int> completed;
    std::vector<Pending> cancelled;
    std::optional<Pending> next;
    Slot* slot = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CudaChannel::Work));
      if (completed_.empty() && queue_.empty() && running_ == 0 && stopping_) return;
      completed.swap(completed_);
      if (std::exchange(interrupted_, false)) {
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->request.Cancelled()) {
            cancelled.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
      }
      if (!queue_.empty() && running_ < caps_.max_in_flight) {
        // A slot is free: running_ counts the busy ones.
        slot = &*std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.busy; });
        slot->busy = true;
        ++running_;
        next = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    for (Pending& p : cancelled) {
      p.done(absl::CancelledError(StrCat(what_, ": request cancelled")));
    }
    for (int s : completed) {
      Slot& done = slots_[static_cast<size_t>(s)];
      cudaError_t status = cudaSuccess;
      {
        absl::MutexLock lock(&mu_);
        status = done.stream_status;
      }
      Finish(done, CudaStatus(status, what_, "the request's copies"));
    }
    if (!next) continue;
    if (limiter_) {
      std::this_thread::sleep_until(paced_until_);
      paced_until_ = limiter_->Reserve(next->request.program->bytes);
    }
    Begin(*slot, std::move(*next));
  }
}

void CudaChannel::Finish(Slot& slot, Status status) {
  RequestDone done = std::move(slot.done);
  slot.request = {};
  {
    absl::MutexLock lock(&mu_);
    slot.busy = false;
    --running_;
  }
  done(std::move(status));
}

void CudaChannel::Begin(Slot& slot, Pending pending) {
  slot.done = std::move(pending.done);
  if (pending.request.Cancelled()) {
    Finish(slot, absl::CancelledError(StrCat(what_, ": request cancelled")));
    return;
  }
  slot.request = std::move(pending.request);
  const Status issued = Issue(slot, slot.request);
  cudaStream_t stream =
      streams_[static_cast<size_t>(slot.device)][static_cast<size_t>(slot.index)].get();
  if (issued.ok()) {
    const cudaError_t err = cudaStreamAddCallback(stream, &CudaChannel::OnStreamDone, &slot, 0);
    if (err == cudaSuccess) return;  // OnStreamDone hands the slot back to Run
    (void)cudaStreamSynchronize(stream);
    Finish(slot, CudaStatus(err, what_, "cudaStreamAddCallback"));
    return;
  }
  // Copies enqueued before the failure may still read or write the
  // request's memory: wait for them before saying the request is over.
  (void)cudaStreamSynchronize(stream);
  (void)cudaGetLastError();
  Finish(slot, issued);
}

Result<Ends> CudaChannel::Resolve(const ChannelRequest& r) const {
  const auto devices = static_cast<int>(streams_.size());
  auto device = [&](const DeviceBytes* d) -> Status {
    if (d->device < 0 || d->device >= devices) {
      return InvalidArgument(what_, ": device ", d->device, " does not exist (", devices, " GPUs)");
    }
    return OkStatus();
  };
  if (caps_.kind == ChannelKind::kGpuWrite) {
    ISO_ASSIGN_OR_RETURN(const HostBytes* src, EndpointAs<HostBytes>(r.src, caps_.name, "source"));
    ISO_ASSIGN_OR_RETURN(const DeviceBytes* dst,
                         EndpointAs<DeviceBytes>(r.dst, caps_.name, "destination"));
    ISO_RETURN_IF_ERROR(device(dst));
    return Ends{dst->device, reinterpret_cast<uint64_t>(src->base), dst->address,
                cudaMemcpyHostToDevice, false};
  }
  if (caps_.kind == ChannelKind::kGpuRead) {
    ISO_ASSIGN_OR_RETURN(const DeviceBytes* src,
                         EndpointAs<DeviceBytes>(r.src, caps_.name, "source"));
    ISO_ASSIGN_OR_RETURN(const HostBytes* dst,
                         EndpointAs<HostBytes>(r.dst, caps_.name, "destination"));
    ISO_RETURN_IF_ERROR(device(src));
    return Ends{src->device, src->address, reinterpret_cast<uint64_t>(dst->base),
                cudaMemcpyDeviceToHost, false};
  }
  ISO_ASSIGN_OR_RETURN(const DeviceBytes* src,
                       EndpointAs<DeviceBytes>(r.src, caps_.name, "source"));
  ISO_ASSIGN_OR_RETURN(const DeviceBytes* dst,
                       EndpointAs<DeviceBytes>(r.dst, caps_.name, "destination"));
  ISO_RETURN_IF_ERROR(device(src));
  ISO_RETURN_IF_ERROR(device(dst));
  // The destination's GPU runs it; its kernels read the source's memory
  // only through peer access. Unified addressing lets the copy engines
  // tell the two GPUs apart by address (cudaMemcpyDefault).
  const bool same = src->device == dst->device;
  return Ends{dst->device, src->address, dst->address, cudaMemcpyDefault,
              same || peer_[static_cast<size_t>(dst->device)][static_cast<size_t>(src->device)]};
}

Status CudaChannel::Issue(Slot& slot, const ChannelRequest& request) {
  auto ends = Resolve(request);
  slot.device = ends.ok() ? ends->device : 0;
  ISO_RETURN_IF_ERROR(ends.status());
  ISO_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ends->device), what_, "cudaSetDevice"));
  LoweringLimits limits{.kernel_allowed = ends->kernel_allowed};
  if (const uint64_t pitch = max_pitch_[static_cast<size_t>(ends->device)]) {
    limits.max_pitch = std::min(limits.max_pitch, pitch);
  }
  const CudaLowering l = LowerProgram(*request.program, limits);
  cudaStream_t stream =
      streams_[static_cast<size_t>(ends->device)][static_cast<size_t>(slot.index)].get();
  for (const CudaCopy& c : l.copies) ISO_RETURN_IF_ERROR(IssueCopy(c, *ends, stream));
  return IssueKernel(slot, l, *ends, stream);
}

Status CudaChannel::IssueCopy(const CudaCopy& c, const Ends& e, cudaStream_t stream) const {
  // Device pointers reach us as integers (DeviceBytes); the copy engines
  // take them back as pointers.
  auto* dst = reinterpret_cast<void*>(e.dst + c.dst_offset);  // NOLINT(performance-no-int-to-ptr)
  const auto* src =
      reinterpret_cast<const void*>(e.src + c.src_offset);  // NOLINT(performance-no-int-to-ptr)
  switch (c.kind) {
    case CudaCopyKind::kMemcpy:
      return CudaStatus(cudaMemcpyAsync(dst, src, c.width, e.kind, stream), what_,
                        "cudaMemcpyAsync");
    case CudaCopyKind::kMemcpy2D:
      return CudaStatus(
          cudaMemcpy2DAsync(dst, c.dst_pitch, src, c.src_pitch, c.width, c.height, e.kind, stream),
          what_, "cudaMemcpy2DAsync");
    case CudaCopyKind::kMemcpy3D: {
      cudaMemcpy3DParms p{};
      // Linear memory as pitched pointers: xsize in bytes, ysize rows per
      // slice; the extent's width is in bytes too (no array involved).
      p.srcPtr = {const_cast<void*>(src), c.src_pitch, c.width, c.src_rows};
      p.dstPtr = {dst, c.dst_pitch, c.width, c.dst_rows};
      p.extent = {c.width, c.height, c.depth};
      p.kind = e.kind;
      return CudaStatus(cudaMemcpy3DAsync(&p, stream), what_, "cudaMemcpy3DAsync");
    }
  }
  return Internal(what_, ": unknown copy kind");
}

Status CudaChannel::IssueKernel(Slot& slot, const CudaLowering& l, const Ends& e,
                                cudaStream_t stream) {
  if (l.kernel_ops.empty()) return OkStatus();
  // The table stays in the slot until the request completes: the copy
  // below may read it after this returns.
  slot.table = l.kernel_ops;
  const size_t bytes = slot.table.size() * sizeof(PackOp);
  DeviceBuffer& table = slot.device_table[static_cast<size_t>(e.device)];
  ISO_RETURN_IF_ERROR(table.Grow(e.device, bytes, what_));
  ISO_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(table.get(), slot.table.data(), bytes, cudaMemcpyHostToDevice, stream), what_,
      "cudaMemcpyAsync (kernel table)"));
  return CudaStatus(
      LaunchPack(static_cast<const PackOp*>(table.get()), static_cast<uint32_t>(slot.table.size()),
                 l.kernel_runs, e.src, e.dst, stream),
      what_, "the pack kernel's launch");
}

}  // namespace

Result<std::unique_ptr<Channel>> MakeCudaChannel(const ChannelConfig& config,
                                                 const GpuProbe& probe) {
  if (config.kind != ChannelKind::kGpuRead && config.kind != ChannelKind::kGpuWrite &&
      config.kind != ChannelKind::kGpuCopy) {
    return InvalidArgument("channel '", config.name, "' is not a GPU channel");
  }
  if (probe.gpus.empty()) {
    return FailedPrecondition("channel '", config.name, "': ", probe.error);
  }
  auto channel = std::make_unique<CudaChannel>(config, probe);
  ISO_RETURN_IF_ERROR(channel->Start(probe));
  return std::unique_ptr<Channel>(std::move(channel));
}

}  // namespace isometry::cuda
