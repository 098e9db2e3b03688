#include "tools/bench/local_scenarios.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "config/runtime_config.h"
#include "daemon/runtime/runtime.h"
#include "tools/bench/host_buffer.h"

namespace isometry::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Best of `repeat` runs, in seconds: the least disturbed run on a noisy box.
double BestOf(int repeat, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

double GBps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

std::unique_ptr<Runtime> MakeRuntime(const RuntimeConfig& c) {
  auto rt = Runtime::Create(c);
  if (!rt.ok()) {
    std::fprintf(stderr, "runtime: %s\n", rt.status().ToString().c_str());
    // A benchmark that cannot go on ends the process; the rows so far are
    // void and no state needs an orderly shutdown.
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
  return *std::move(rt);
}

void MustCopy(Runtime& rt, CopyRequest req) {
  auto t = rt.Copy(std::move(req));
  Status s = t.ok() ? t->Wait() : t.status();
  if (!s.ok()) {
    std::fprintf(stderr, "copy failed: %s\n", s.ToString().c_str());
    // A benchmark that cannot go on ends the process; the rows so far are
    // void and no state needs an orderly shutdown.
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
}

InstanceRef Ref(MemoryId m, const HostBuffer& b, const InstanceShape& s) {
  return {m, b.data(), b.size(), s};
}

InstanceShape Bytes1D(uint64_t bytes) {
  return {Box::FromExtents({static_cast<int64_t>(bytes / 8)}), FieldSpace::Uniform(1, 8),
          Layout::Aos(1)};
}

}  // namespace

void RunContiguous(const LocalOptions& o, Report& report) {
  auto rt = MakeRuntime(DefaultRuntimeConfig());
  const MemoryId sys = *rt->FindMemory("sys0");
  const InstanceShape shape = Bytes1D(o.contiguous_bytes);
  HostBuffer src(shape.total_bytes(), 3), dst(shape.total_bytes(), 0);
  const double ours = BestOf(
      o.repeat, [&] { MustCopy(*rt, {.src = Ref(sys, src, shape), .dst = Ref(sys, dst, shape)}); });
  const double base = BestOf(o.repeat, [&] { std::memcpy(dst.data(), src.data(), src.size()); });
  report.Add({"contiguous_sys_sys", "throughput", GBps(src.size(), ours), "GB/s",
              "memcpy (1 thread)", GBps(src.size(), base), base / ours, ">= 0.95"});
}

void RunAosToSoa(const LocalOptions& o, Report& report) {
  auto rt = MakeRuntime(DefaultRuntimeConfig());
  const MemoryId sys = *rt->FindMemory("sys0");
  const int64_t n = static_cast<int64_t>(o.aos_entries);
  const FieldSpace fs = FieldSpace::Uniform(8, 4);
  const InstanceShape aos{Box::FromExtents({n}), fs, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fs, Layout::Soa(1)};
  HostBuffer src(aos.total_bytes(), 5), dst(soa.total_bytes(), 0);
  const double ours = BestOf(
      o.repeat, [&] { MustCopy(*rt, {.src = Ref(sys, src, aos), .dst = Ref(sys, dst, soa)}); });
  // The loop a programmer writes for this exact struct: known field count.
  struct Entry {
    float f[8];
  };
  const double base = BestOf(o.repeat, [&] {
    const Entry* in = reinterpret_cast<const Entry*>(src.data());
    float* out = reinterpret_cast<float*>(dst.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int f = 0; f < 8; ++f) {
        out[f * n + i] = in[i].f[f];
      }
    }
  });
  report.Add({"aos_to_soa_4Mx8x4B", "throughput", GBps(src.size(), ours), "GB/s",
              "hand-written loop", GBps(src.size(), base), base / ours, ">= 1.0"});
}

void RunPipeline(const LocalOptions& o, Report& report) {
  for (const bool capped : {false, true}) {
    RuntimeConfig c = DefaultRuntimeConfig();
    // Two channels, one per hop, so each hop has its own bandwidth (and, in
    // the capped variant, its own cap) like hops on different hardware.
    ChannelConfig up = c.channels[0], down = c.channels[0];
    up.name = "hop_up";
    up.edges = {{"sys0", "reg0"}};
    down.name = "hop_down";
    down.edges = {{"reg0", "sys0"}};
    up.threads = down.threads = 1;
    if (capped) {
      up.rate_limit_bytes_per_s = down.rate_limit_bytes_per_s = o.hop_rate;
    }
    c.channels = {up, down};
    c.memories[1].staging_bytes = o.pipeline_bytes + (64ull << 20);
    auto rt = MakeRuntime(c);
    const MemoryId sys = *rt->FindMemory("sys0"), reg = *rt->FindMemory("reg0");
    const InstanceShape shape = Bytes1D(o.pipeline_bytes);
    HostBuffer src(shape.total_bytes(), 7), dst(shape.total_bytes(), 0),
        stage(shape.total_bytes(), 0);
    const double pipelined = BestOf(o.repeat, [&] {
      MustCopy(
          *rt,
          {.src = Ref(sys, src, shape), .dst = Ref(sys, dst, shape), .via = {{reg, shape.layout}}});
    });
    // Staged: the same two hops one after the other through a full-size
    // staging instance in REG.
    const double staged = BestOf(o.repeat, [&] {
      MustCopy(*rt, {.src = Ref(sys, src, shape), .dst = Ref(reg, stage, shape)});
      MustCopy(*rt, {.src = Ref(reg, stage, shape), .dst = Ref(sys, dst, shape)});
    });
    const std::string name = capped ? "two_hop_capped" : "two_hop_memcpy";
    report.Add({name, "throughput", GBps(src.size(), pipelined), "GB/s", "staged (hop, then hop)",
                GBps(src.size(), staged), staged / pipelined, capped ? ">= 1.6" : "report"});
  }
}

void RunPriority(const LocalOptions& o, Report& report) {
  auto rt = MakeRuntime(DefaultRuntimeConfig());
  const MemoryId sys = *rt->FindMemory("sys0");
  const InstanceShape hshape = Bytes1D(64ull << 20);
  const InstanceShape lshape = Bytes1D(256ull << 20);
  HostBuffer hs(hshape.total_bytes(), 1), hd(hshape.total_bytes(), 0);
  std::vector<std::unique_ptr<HostBuffer>> low;
  low.reserve(16);
  for (int i = 0; i < 16; ++i) {
    low.push_back(std::make_unique<HostBuffer>(lshape.total_bytes(), i));
  }
  auto high = [&] {
    MustCopy(*rt, {.src = Ref(sys, hs, hshape), .dst = Ref(sys, hd, hshape), .priority = 10});
  };
  const double idle = BestOf(o.repeat, high);
  double loaded = 1e300;
  for (int r = 0; r < o.repeat; ++r) {
    std::vector<Transfer> lows;
    for (int i = 0; i < 8; ++i) {
      auto t = rt->Copy({.src = Ref(sys, *low[2 * static_cast<size_t>(i)], lshape),
                         .dst = Ref(sys, *low[2 * static_cast<size_t>(i) + 1], lshape)});
      if (t.ok()) {
        lows.push_back(*t);
      }
    }
    while (rt->Channels()[0].requests_in_flight == 0) {
    }
    loaded = std::min(loaded, BestOf(1, high));
    for (Transfer& t : lows) {
      (void)t.Wait();
    }
  }
  report.Add({"priority_under_load", "completion_time", loaded * 1e3, "ms",
              "same transfer on an idle channel", idle * 1e3, loaded / idle, "<= 1.2"});
}

}  // namespace isometry::bench
