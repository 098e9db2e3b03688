// The GPU channels (channels/cuda/) against CUDA's own copies and a
// hand-written kernel on the same GPU, in the same run (issue #15's
// benchmark), each row as the median of paired rounds (ours, then the
// baseline, back to back): host <-> device 1 GiB pinned and pageable vs
// cudaMemcpy; device -> device vs cudaMemcpy D2D; AOS -> SOA of 4M x 8 x
// 4 B on the GPU vs a hand-written transpose kernel; and the runtime's
// pipelined host -> GPU -> host copy through pinned rings vs the staging
// code a user writes (cudaMemcpy in, cudaMemcpy out).
//
// The channel rows submit the copy as the runtime does: requests of the
// GPU channels' request size (gpu.request_bytes, 4 MiB), all queued at
// once, max_in_flight of them on streams. Exits 77 with the probe's reason
// where no GPU is visible.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "channels/added_channels.h"
#include "channels/channel_factory.h"
#include "channels/cuda/cuda_channel.h"
#include "channels/cuda/cuda_probe.h"
#include "config/gpu_config.h"
#include "core/main_guard.h"
#include "daemon/runtime/runtime.h"
#include "layout/compiler.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/gpu_baselines.h"
#include "tools/bench/host_buffer.h"
#include "tools/bench/stopwatch.h"

namespace isometry::bench {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpu_bench: %s\n", what.c_str());
  std::exit(1);  // NOLINT(concurrency-mt-unsafe): the rows so far are void
}

void Check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) Die(std::string(call) + ": " + cudaGetErrorString(e));
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(uint64_t bytes, int fill = 0) {
    Check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
    Check(cudaMemset(ptr_, fill, bytes), "cudaMemset");
    // The memset runs on the legacy stream, the channels on non-blocking
    // ones: let it land first.
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return ptr_; }
  DeviceBytes at() const { return {0, reinterpret_cast<uint64_t>(ptr_)}; }

 private:
  void* ptr_ = nullptr;
};

// Host memory in 2 MiB pages, pinned and mapped as a ZCM memory's is.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(uint64_t bytes, int fill) : host_(bytes, fill) {
    Check(cudaHostRegister(host_.data(), bytes, cudaHostRegisterPortable | cudaHostRegisterMapped),
          "cudaHostRegister");
  }
  ~PinnedBuffer() { (void)cudaHostUnregister(host_.data()); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* data() const { return host_.data(); }

 private:
  HostBuffer host_;
};

std::unique_ptr<Channel> MakeGpuChannel(ChannelKind kind, int in_flight) {
  ChannelConfig c;
  c.name = "bench";
  c.kind = kind;
  c.max_in_flight = in_flight;
  auto ch = cuda::MakeCudaChannel(c, cuda::CachedGpuProbe());
  if (!ch.ok()) Die(std::string(ch.status().message()));
  return std::move(*ch);
}

Endpoint At(const Endpoint& e, uint64_t offset) {
  if (const auto* h = std::get_if<HostBytes>(&e)) return HostBytes{h->base + offset};
  const auto& d = std::get<DeviceBytes>(e);
  return DeviceBytes{d.device, d.address + offset};
}

// Submits every request at once and waits for the last; seconds taken.
double RunAll(Channel& channel, std::vector<ChannelRequest> requests) {
  std::mutex mu;
  std::condition_variable cv;
  size_t left = requests.size();
  Status failed;
  const auto start = Clock::now();
  for (ChannelRequest& r : requests) {
    channel.Submit(std::move(r), [&](const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && failed.ok()) failed = s;
      if (--left == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return left == 0; });
  const double seconds = SecondsSince(start);
  if (!failed.ok()) Die("channel request failed: " + std::string(failed.message()));
  return seconds;
}

// [0, bytes) from `src` to `dst` in contiguous requests of `chunk` bytes.
std::vector<ChannelRequest> Contiguous(const Endpoint& src, const Endpoint& dst, uint64_t bytes,
                                       uint64_t chunk) {
  std::vector<ChannelRequest> out;
  for (uint64_t at = 0; at < bytes; at += chunk) {
    out.push_back({.program = ContiguousProgram(std::min(chunk, bytes - at)),
                   .src = At(src, at),
                   .dst = At(dst, at)});
  }
  return out;
}

struct Options {
  uint64_t bytes = 1ull << 30;
  uint64_t request_bytes = GpuConfig{}.request_bytes;
  int in_flight = GpuConfig{}.max_in_flight;
  uint64_t elements = 4ull << 20;
  int rounds = 5;
  bool json = false;
};

// One untimed pass, then `rounds` paired ones (PairedRound's alternating
// order); `ours` and `base` return GB/s.
Rounds Paired(int rounds, const std::function<double()>& ours,
              const std::function<double()>& base) {
  ours();
  base();
  Rounds r;
  for (int i = 0; i < rounds; ++i) {
    double o = 0, b = 0;
    PairedRound(
        i, [&] { o = ours(); }, [&] { b = base(); });
    r.Add(o, b);
  }
  return r;
}

void ContiguousRows(const Options& o, Report& report) {
  PinnedBuffer pinned(o.bytes, 3);
  HostBuffer pageable(o.bytes, 4);
  DeviceBuffer dev(o.bytes), dev2(o.bytes);
  auto write = MakeGpuChannel(ChannelKind::kGpuWrite, o.in_flight);
  auto read = MakeGpuChannel(ChannelKind::kGpuRead, o.in_flight);
  auto copy = MakeGpuChannel(ChannelKind::kGpuCopy, o.in_flight);
  const uint64_t n = o.bytes, chunk = o.request_bytes;
  // cudaMemcpy returns before a device-to-device copy ends: wait for it.
  auto memcpy_gbps = [&](void* dst, const void* src, cudaMemcpyKind kind) {
    return GBps(n, Timed([&] {
                  Check(cudaMemcpy(dst, src, n, kind), "cudaMemcpy");
                  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                }));
  };
  auto channel_gbps = [&](Channel& c, const Endpoint& src, const Endpoint& dst) {
    return GBps(n, RunAll(c, Contiguous(src, dst, n, chunk)));
  };
  const HostBytes pin{pinned.data()}, page{pageable.data()};
  Rounds r = Paired(
      o.rounds, [&] { return channel_gbps(*write, pin, dev.at()); },
      [&] { return memcpy_gbps(dev.data(), pinned.data(), cudaMemcpyHostToDevice); });
  r.Print("host->GPU pinned");
  report.Add(MedianRow("gpu", "host->GPU 1 GiB pinned (GPUWrite)", r, "cudaMemcpy H2D", ">= 0.95"));
  r = Paired(
      o.rounds, [&] { return channel_gbps(*read, dev.at(), pin); },
      [&] { return memcpy_gbps(pinned.data(), dev.data(), cudaMemcpyDeviceToHost); });
  r.Print("GPU->host pinned");
  report.Add(MedianRow("gpu", "GPU->host 1 GiB pinned (GPURead)", r, "cudaMemcpy D2H", ">= 0.95"));
  r = Paired(
      o.rounds, [&] { return channel_gbps(*write, page, dev.at()); },
      [&] { return memcpy_gbps(dev.data(), pageable.data(), cudaMemcpyHostToDevice); });
  r.Print("host->GPU pageable");
  report.Add(MedianRow("gpu", "host->GPU 1 GiB pageable (GPUWrite)", r, "cudaMemcpy H2D", ""));
  r = Paired(
      o.rounds, [&] { return channel_gbps(*copy, dev.at(), dev2.at()); },
      [&] { return memcpy_gbps(dev2.data(), dev.data(), cudaMemcpyDeviceToDevice); });
  r.Print("GPU->GPU");
  report.Add(MedianRow("gpu", "GPU->GPU 1 GiB (GPUCopy)", r, "cudaMemcpy D2D", ">= 0.95"));
}

// AOS -> SOA of o.elements structs of 8 4-byte fields on the GPU, in
// requests of about request_bytes each (chunks of whole structs).
void AosToSoaRow(const Options& o, Report& report) {
  const int fields = 8;
  const Box bounds = Box::FromExtents({static_cast<int64_t>(o.elements)});
  const FieldSpace fs = FieldSpace::Uniform(fields, 4);
  const InstanceShape aos{bounds, fs, Layout::Aos(1)}, soa{bounds, fs, Layout::Soa(1)};
  const uint64_t bytes = aos.total_bytes();
  DeviceBuffer src(bytes, 5), dst(bytes);
  const auto per_chunk = static_cast<int64_t>(std::max<uint64_t>(o.request_bytes / 32, 1));
  std::vector<std::shared_ptr<const CopyProgram>> programs;
  for (int64_t lo = 0; lo < bounds.hi[0]; lo += per_chunk) {
    Box box = bounds;
    box.lo[0] = lo;
    box.hi[0] = std::min(lo + per_chunk, bounds.hi[0]);
    auto p = CompileCopy(aos, soa, box);
    if (!p.ok()) Die(std::string(p.status().message()));
    programs.push_back(std::make_shared<const CopyProgram>(std::move(*p)));
  }
  auto copy = MakeGpuChannel(ChannelKind::kGpuCopy, o.in_flight);
  auto ours = [&] {
    std::vector<ChannelRequest> requests;
    requests.reserve(programs.size());
    for (const auto& p : programs) {
      requests.push_back({.program = p, .src = src.at(), .dst = dst.at()});
    }
    return GBps(bytes, RunAll(*copy, std::move(requests)));
  };
  auto hand = [&] {
    return GBps(bytes, Timed([&] {
                  Check(static_cast<cudaError_t>(
                            TransposeAosToSoa4(src.data(), dst.data(), o.elements, fields)),
                        "transpose kernel");
                }));
  };
  const Rounds r = Paired(o.rounds, ours, hand);
  r.Print("AOS->SOA on the GPU");
  report.Add(MedianRow("gpu", "AOS->SOA 4M x 8 x 4 B on the GPU (GPUCopy)", r,
                       "hand-written transpose kernel", ">= 0.9"));
  // What the copy engines alone make of it (one cudaMemcpy2D of 4-byte
  // rows per field): why narrow runs go to the kernel.
  auto engines = [&] {
    return GBps(bytes, Timed([&] {
                  auto* out = static_cast<std::byte*>(dst.data());
                  const auto* in = static_cast<const std::byte*>(src.data());
                  for (int f = 0; f < fields; ++f) {
                    const auto field = static_cast<uint64_t>(f);
                    Check(cudaMemcpy2DAsync(out + field * o.elements * 4, 4, in + field * 4, 32, 4,
                                            o.elements, cudaMemcpyDeviceToDevice, nullptr),
                          "cudaMemcpy2DAsync");
                  }
                  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                }));
  };
  const Rounds e = Paired(o.rounds, engines, hand);
  e.Print("AOS->SOA by cudaMemcpy2D per field");
  report.Add(MedianRow("gpu", "AOS->SOA 4M x 8 x 4 B, cudaMemcpy2D per field", e,
                       "hand-written transpose kernel", ""));
}

// The runtime's pipelined host -> GPU -> host copy of pageable user
// memory, through pinned ZCM rings on both sides, against what a user
// writes: cudaMemcpy the whole buffer in, then out.
void RuntimeRow(const Options& o, Report& report) {
  RuntimeConfig config = DefaultRuntimeConfig();
  GpuConfig gpu_config;
  gpu_config.request_bytes = o.request_bytes;
  gpu_config.max_in_flight = o.in_flight;
  auto added = ResolveGpus(config, gpu_config, DetectGpus());
  if (!added.ok()) Die(std::string(added.status().message()));
  auto rt = Runtime::Create(config);
  if (!rt.ok()) Die(std::string(rt.status().message()));
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), zcm = *r.FindMemory("zcm0");
  const MemoryId gpu = *r.FindMemory("gpu0");
  const InstanceShape shape{Box::FromExtents({static_cast<int64_t>(o.bytes / 8)}),
                            FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  HostBuffer src(o.bytes, 6), dst(o.bytes, 7);
  DeviceBuffer dev(o.bytes);
  const Layout aos = Layout::Aos(1);
  std::string plan;
  auto ours = [&] {
    return GBps(o.bytes, Timed([&] {
                  auto t = r.Copy({.src = {sys, src.data(), o.bytes, shape},
                                   .dst = {sys, dst.data(), o.bytes, shape},
                                   .via = {{zcm, aos}, {gpu, aos}, {zcm, aos}}});
                  if (!t.ok()) Die(std::string(t.status().message()));
                  const Status s = t->Wait();
                  if (!s.ok()) Die(std::string(s.message()));
                  plan = t->path().ToString(r.topology());
                }));
  };
  auto staged = [&] {
    return GBps(
        o.bytes, Timed([&] {
          Check(cudaMemcpy(dev.data(), src.data(), o.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
          Check(cudaMemcpy(dst.data(), dev.data(), o.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        }));
  };
  const Rounds rounds = Paired(o.rounds, ours, staged);
  std::fprintf(stderr, "  runtime path: %s\n", plan.c_str());
  rounds.Print("host->GPU->host, runtime vs staged");
  report.Add(MedianRow("gpu", "host->GPU->host 1 GiB pageable, pipelined (runtime)", rounds,
                       "cudaMemcpy H2D then D2H", ">= 1.0"));
}

void PrintMachine() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::fprintf(stderr, "gpu_bench: %s; CUDA driver %d.%d, runtime %d.%d\n",
               cuda::CachedGpuProbe().Summary().c_str(), driver / 1000, driver % 1000 / 10,
               runtime / 1000, runtime % 1000 / 10);
}

}  // namespace
}  // namespace isometry::bench

int Main(int argc, char** argv) {
  using namespace isometry::bench;
  Options o;
  uint64_t mib = o.bytes >> 20, request_kib = o.request_bytes >> 10;
  CLI::App app{"The GPU channels against cudaMemcpy and a hand-written kernel (GPU 0)"};
  app.add_option("--mib", mib, "Size of the contiguous and runtime copies in MiB")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--request-kib", request_kib, "Request size of the channel rows in KiB")
      ->check(CLI::Range(4, 1 << 20));
  app.add_option("--in-flight", o.in_flight, "Streams per channel (max_in_flight)")
      ->check(CLI::Range(1, 64));
  app.add_option("--elements", o.elements, "Structs in the AOS->SOA row")
      ->check(CLI::Range(1024, 1 << 28));
  app.add_option("--rounds", o.rounds, "Paired rounds per row")->check(CLI::Range(1, 100));
  app.add_flag("--json", o.json, "One JSON object per row");
  CLI11_PARSE(app, argc, argv);
  o.bytes = mib << 20;
  o.request_bytes = request_kib << 10;
  const isometry::cuda::GpuProbe& probe = isometry::cuda::CachedGpuProbe();
  if (probe.gpus.empty()) {
    std::fprintf(stderr, "gpu_bench: skipped: %s\n", probe.error.c_str());
    return 77;
  }
  PrintMachine();
  Report report(o.json);
  ContiguousRows(o, report);
  AosToSoaRow(o, report);
  RuntimeRow(o, report);
  report.Finish();
  return 0;
}

int main(int argc, char** argv) { return isometry::RunMain("gpu_bench", 1, Main, argc, argv); }
