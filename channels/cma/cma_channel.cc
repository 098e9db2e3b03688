#include "channels/cma/cma_channel.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "channels/channel_workers.h"
#include "channels/cma/client_process.h"
#include "channels/cma/own_hops.h"
#include "core/strings.h"
#include "procmem/cma_copy.h"
#include "procmem/cma_gather.h"

namespace isometry {

namespace {

class CmaChannel final : public Channel {
 public:
  explicit CmaChannel(const ChannelConfig& config) {
    caps_.name = config.name;
    caps_.kind = ChannelKind::kCma;
    for (MemoryKind host : {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm}) {
      caps_.memory_kinds.emplace_back(MemoryKind::kProcess, host);
      caps_.memory_kinds.emplace_back(host, MemoryKind::kProcess);
    }
    caps_.converts_layout = true;  // at a per-run cost: MeasureCmaCost
    caps_.request_bytes = config.request_bytes;
    // As memcpy: a thread that finishes a request finds the next queued.
    caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : 2 * config.threads;
    caps_.runs_inline = true;
    caps_.express = true;  // ChannelWorkers
    // A request cancelled while queued ends at once; a running one at its
    // next batch (CmaCopy).
    workers_ = std::make_unique<ChannelWorkers>(
        caps_.name, config.threads,
        [this](const ChannelRequest& r, const RequestDone& done) { done(Copy(r)); });
  }

  const ChannelCaps& caps() const override { return caps_; }

  Status RunInline(const ChannelRequest& request) override { return Copy(request); }

  bool RunsElsewhere(const ChannelRequest& request) const override {
    return OwnHopOf(request) != nullptr;
  }

  void Submit(ChannelRequest request, RequestDone done) override {
    if (OwnHops* hops = OwnHopOf(request)) {
      // The client's own hop: straight onto its window's thread, never on
      // ours (passing it through one of ours cost a thread wakeup more per
      // copy). The window only queues it here.
      hops->Enqueue([this, hops, r = std::move(request), done = std::move(done)] {
        done(RunOwnHop(*hops, r));
      });
      return;
    }
    workers_->Push(std::move(request), std::move(done));
  }

 private:
  Result<CmaTarget> TargetOf(const ChannelRequest& request) const {
    const auto* src_process = std::get_if<ProcessBytes>(&request.src);
    const auto* dst_process = std::get_if<ProcessBytes>(&request.dst);
    if (src_process && dst_process) {
      return FailedPrecondition("channel '", caps_.name,
                                "' copies between another process and this one, not between two "
                                "other processes (processes ",
                                src_process->pid, " and ", dst_process->pid,
                                "): stage through host memory");
    }
    CmaTarget t;
    t.channel = caps_.name;
    const ProcessBytes* process = nullptr;
    const HostBytes* host = nullptr;
    if (src_process) {
      t.direction = CmaDirection::kRead;
      process = src_process;
      ISO_ASSIGN_OR_RETURN(host, EndpointAs<HostBytes>(request.dst, caps_.name, "destination"));
    } else {
      t.direction = CmaDirection::kWrite;
      ISO_ASSIGN_OR_RETURN(process,
                           EndpointAs<ProcessBytes>(request.dst, caps_.name, "destination"));
      ISO_ASSIGN_OR_RETURN(host, EndpointAs<HostBytes>(request.src, caps_.name, "source"));
    }
    if (process->pidfd < 0) {
      return FailedPrecondition("channel '", caps_.name, "': process ", process->pid,
                                " comes without the pidfd it registered with");
    }
    t.pid = process->pid;
    t.pidfd = process->pidfd;
    t.mem_fd = process->mem_fd;
    t.remote_base = process->address;
    t.local_base = host->base;
    return t;
  }

  // The hop window of a request between a client's own memory and that
  // window's data area (own_hops.h), else null.
  static OwnHops* OwnHopOf(const ChannelRequest& r) {
    const auto* src = std::get_if<ProcessBytes>(&r.src);
    const auto* dst = std::get_if<ProcessBytes>(&r.dst);
    const ProcessBytes* process = src ? src : dst;
    const auto* host = std::get_if<HostBytes>(src ? &r.dst : &r.src);
    if (!process || (src && dst) || !host || !process->own_hops) return nullptr;
    return process->own_hops->InData(host->base) ? process->own_hops : nullptr;
  }

  // Has the client run it; by CMA when the window does not take it.
  Status RunOwnHop(OwnHops& hops, const ChannelRequest& request) const {
    ISO_ASSIGN_OR_RETURN(CmaTarget target, TargetOf(request));
    if (auto ran = hops.Run(*request.program, target.local_base, target.remote_base,
                            target.direction, request.cancelled)) {
      return *ran;
    }
    return Copy(request);
  }

  Status Copy(const ChannelRequest& request) const {
    ISO_ASSIGN_OR_RETURN(CmaTarget target, TargetOf(request));

    // Many small remote runs close together: one read and a local gather.
    if (auto gathered = TryGatherRead(*request.program, target, request.cancelled)) {
      return *gathered;
    }
    return CmaCopy(*request.program, target, request.cancelled);
  }

  ChannelCaps caps_;                         // constant after construction
  std::unique_ptr<ChannelWorkers> workers_;  // last: its threads stop first
};

}  // namespace

Result<std::unique_ptr<Channel>> MakeCmaChannel(const ChannelConfig& config) {
  if (config.kind != ChannelKind::kCma) {
    return InvalidArgument("channel '", config.name, "' is not a cma channel");
  }
  if (config.threads < 1) {
    return InvalidArgument("channel '", config.name, "' needs at least one thread");
  }
  if (config.rate_limit_bytes_per_s) {
    return InvalidArgument("channel '", config.name, "': cma channels take no rate_limit");
  }
  return std::unique_ptr<Channel>(new CmaChannel(config));
}

Status ProbeCma() {
  char from[8] = "isometr", to[8] = {};
  iovec local{to, sizeof(to)}, remote{from, sizeof(from)};
  if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != sizeof(from)) {
    return Unavailable("process_vm_readv of this process fails: ", ErrnoString(errno));
  }
  auto pidfd = OpenPidfd(::getpid());
  if (!pidfd.ok()) return Unavailable(pidfd.status().message());
  // Reading itself passes every ptrace check, so Yama's "no attach" (3),
  // which refuses every other process, is read from its sysctl.
  if (YamaPtraceScope() == 3) {
    return Unavailable("kernel.yama.ptrace_scope is 3: no process may read another's memory");
  }
  return OkStatus();
}

int YamaPtraceScope() {
  char buf[8] = {};
  UniqueFd fd(::open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return -1;
  const ssize_t n = ::read(fd.get(), buf, sizeof(buf) - 1);
  if (n < 1 || buf[0] < '0' || buf[0] > '3') return -1;
  return buf[0] - '0';
}

}  // namespace isometry
