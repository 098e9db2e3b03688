// GPU paths through the real runtime on a machine without a GPU: the
// node's config with one GPU added by ResolveGpus, FBM staging rings from a
// GpuMemory whose "device memory" is host memory, and GPU channels that
// check each request's ends are what a CUDA channel is handed (host bytes
// on the host side, device bytes of GPU 0 inside a live allocation on the
// device side) and then run the memcpy channel on them. What this proves
// without a GPU: the graph, the planner's and forced paths through FBM,
// the rings' device endpoints, their budgets and release, pinning of ZCM
// rings; what it cannot: CUDA itself (gpu_runtime_test, on a GPU).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include "channels/added_channels.h"
#include "channels/channel_factory.h"
#include "channels/gpu_memory.h"
#include "channels/memcpy/memcpy_channel.h"
#include "daemon/runtime/runtime.h"
#include "unit/gpu_test_buffers.h"
#include "unit/temp_dir.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

class HostBackedGpu final : public GpuMemory {
 public:
  ~HostBackedGpu() override {
    for (const auto& [at, a] : live) {
      std::free(reinterpret_cast<void*>(at));  // NOLINT(performance-no-int-to-ptr)
    }
  }
  Result<uint64_t> AllocateDevice(int device, uint64_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) return ResourceExhausted("out of memory");
    std::lock_guard<std::mutex> lock(mu);
    const auto at = reinterpret_cast<uint64_t>(p);
    live[at] = {device, bytes};
    ++allocations;
    return at;
  }
  void FreeDevice(int device, uint64_t address) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(address);
    if (it == live.end() || it->second.first != device) {
      ++bad_frees;
      return;
    }
    live.erase(it);
    std::free(reinterpret_cast<void*>(address));  // NOLINT(performance-no-int-to-ptr)
  }
  Status PinHost(void* base, uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu);
    pinned[base] = bytes;
    ++pins;
    return OkStatus();
  }
  void UnpinHost(void* base) override {
    std::lock_guard<std::mutex> lock(mu);
    pinned.erase(base);
  }
  // Whether [address, address + bytes) lies in one live allocation of `device`.
  bool Inside(int device, uint64_t address, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.upper_bound(address);
    if (it == live.begin()) return false;
    --it;
    return it->second.first == device && address + bytes <= it->first + it->second.second;
  }
  std::mutex mu;
  std::map<uint64_t, std::pair<int, uint64_t>> live;  // address -> (device, bytes)
  std::map<void*, uint64_t> pinned;
  int allocations = 0, pins = 0, bad_frees = 0;
};

// A GPU channel of `kind` over the memcpy channel.
class EmulatedGpuChannel final : public Channel {
 public:
  EmulatedGpuChannel(std::unique_ptr<Channel> inner, const ChannelConfig& c, HostBackedGpu& gpu,
                     std::map<ChannelKind, int>& counts)
      : inner_(std::move(inner)), caps_(inner_->caps()), gpu_(gpu), counts_(counts) {
    caps_.name = c.name;
    caps_.kind = c.kind;
    caps_.runs_inline = false;
  }
  const ChannelCaps& caps() const override { return caps_; }
  void Submit(ChannelRequest req, RequestDone done) override {
    const bool device_src = caps_.kind != ChannelKind::kGpuWrite;
    const bool device_dst = caps_.kind != ChannelKind::kGpuRead;
    Status s = OkStatus();
    for (auto [end, device] : {std::pair{&req.src, device_src}, std::pair{&req.dst, device_dst}}) {
      if (!device) {
        if (!std::holds_alternative<HostBytes>(*end)) s = FailedPrecondition("host end expected");
        continue;
      }
      const auto* d = std::get_if<DeviceBytes>(end);
      if (!d || !gpu_.Inside(0, d->address, 1)) {
        s = FailedPrecondition("device end of GPU 0 expected");
        continue;
      }
      *end =
          HostBytes{reinterpret_cast<std::byte*>(d->address)};  // NOLINT(performance-no-int-to-ptr)
    }
    {
      std::lock_guard<std::mutex> lock(gpu_.mu);
      ++counts_[caps_.kind];
    }
    if (!s.ok()) {
      done(s);
      return;
    }
    inner_->Submit(std::move(req), std::move(done));
  }

 private:
  std::unique_ptr<Channel> inner_;
  ChannelCaps caps_;
  HostBackedGpu& gpu_;
  std::map<ChannelKind, int>& counts_;
};

struct Emulated {
  std::shared_ptr<HostBackedGpu> gpu = std::make_shared<HostBackedGpu>();
  std::map<ChannelKind, int> counts;
  std::unique_ptr<Runtime> rt;
};

void Start(Emulated& e, uint64_t th, const std::string& disk_dir = "") {
  RuntimeConfig c = DefaultRuntimeConfig();
  if (!disk_dir.empty()) AddDiskMemory(c, disk_dir);
  c.space_threshold = th;
  for (ChannelConfig& ch : c.channels) ch.request_bytes = 64 << 10;
  GpuConfig g;
  g.request_bytes = 64 << 10;
  g.staging_bytes = 8 << 20;
  REQUIRE(ResolveGpus(c, g, GpuInventory{{1ull << 30}, {{false}}, ""}).ok());
  ChannelMaker maker = [&e](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
    if (cc.kind != ChannelKind::kGpuWrite && cc.kind != ChannelKind::kGpuRead &&
        cc.kind != ChannelKind::kGpuCopy) {
      return MakeChannel(cc);
    }
    ChannelConfig host = cc;
    host.kind = ChannelKind::kMemcpy;
    ISO_ASSIGN_OR_RETURN(std::unique_ptr<Channel> inner, MakeMemcpyChannel(host));
    return std::unique_ptr<Channel>(new EmulatedGpuChannel(std::move(inner), cc, *e.gpu, e.counts));
  };
  auto rt = Runtime::Create(c, maker, e.gpu);
  REQUIRE(rt.ok());
  e.rt = *std::move(rt);
}

using Buf = GpuTestBuf;

}  // namespace

TEST_CASE("emulated GPU: random layouts round-trip host -> FBM -> host and FBM -> FBM") {
  Emulated e;
  const uint64_t th = 64 << 10;
  Start(e, th);
  Runtime& r = *e.rt;
  const MemoryId sys = *r.FindMemory("sys0"), zcm = *r.FindMemory("zcm0");
  const MemoryId gpu = *r.FindMemory("gpu0");
  std::mt19937_64 rng(1515);
  for (int i = 0; i < 36; ++i) {
    const int dims = 1 + i % 3;
    const Box bounds = RandomBounds(rng, dims, dims == 1 ? 20000 : (dims == 2 ? 150 : 30));
    const FieldSpace fs = RandomFields(rng, 5);
    Buf src({bounds, fs, RandomLayout(rng, bounds)}, static_cast<uint64_t>(i));
    Buf dst({bounds, fs, RandomLayout(rng, bounds)}, 300u + static_cast<uint64_t>(i));
    std::vector<HopSpec> via;
    switch (i % 3) {
      case 0:  // pageable host memory to the GPU and back
        via = {{gpu, SmallBlocks(rng, bounds)}};
        break;
      case 1:  // through pinned ZCM
        via = {{zcm, SmallBlocks(rng, bounds)},
               {gpu, SmallBlocks(rng, bounds)},
               {zcm, SmallBlocks(rng, bounds)}};
        break;
      default:  // converted on the GPU
        via = {{gpu, SmallBlocks(rng, bounds)}, {gpu, SmallBlocks(rng, bounds)}};
    }
    INFO("case " << i);
    auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .via = via});
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    REQUIRE(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, bounds) == "");
  }
  CHECK(e.counts[ChannelKind::kGpuWrite] > 0);
  CHECK(e.counts[ChannelKind::kGpuRead] > 0);
  CHECK(e.counts[ChannelKind::kGpuCopy] > 0);
  for (const MemoryUsage& m : r.Memories()) {
    INFO(m.name);
    CHECK(m.largest_buffer <= th);
    CHECK(m.staging_used == 0);
    if (m.name == "gpu0" || m.name == "zcm0") CHECK(m.largest_buffer > 0);
  }
  CHECK(e.gpu->pins > 0);  // ZCM rings were pinned
  e.rt.reset();
  CHECK(e.gpu->live.empty());  // every device ring freed
  CHECK(e.gpu->pinned.empty());
  CHECK(e.gpu->bad_frees == 0);
}

TEST_CASE("emulated GPU: DSK -> FBM -> DSK far below TH, and the plan isoctl shows") {
  TempDir dir;
  Emulated e;
  const uint64_t th = 128 << 10;
  Start(e, th, dir.path);
  Runtime& r = *e.rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  const MemoryId gpu = *r.FindMemory("gpu0"), zcm = *r.FindMemory("zcm0");
  const Box bounds = Box::FromExtents({1 << 19});
  const FieldSpace fs = FieldSpace::Uniform(2, 4);  // 4 MiB: 32 x TH
  auto file = [&](const char* name, const Layout& l) {
    InstanceRef f;
    f.memory = dsk;
    f.shape = {bounds, fs, l};
    f.file = name;
    return f;
  };
  // What `isoctl plan dsk0 gpu0` shows (Node::Plan explains it this way).
  auto ex =
      r.Explain(file("in.bin", Layout::Aos(1)),
                {gpu, nullptr, bounds.volume() * fs.total_bytes(), {bounds, fs, Layout::Soa(1)}});
  REQUIRE(ex.ok());
  INFO(ex->path.ToString(r.topology()));
  REQUIRE(ex->path.edges.size() >= 2);
  CHECK(ex->path.edges.front().kind == ChannelKind::kDiskRead);
  CHECK(ex->path.edges.back().kind == ChannelKind::kGpuWrite);
  CHECK_THAT(ex->path.ToString(r.topology()), Catch::Contains("gpu_write0]-> gpu0"));
  for (uint64_t b : ex->buffer_bytes) CHECK(b <= th);

  Buf src({bounds, fs, Layout::Aos(1)}, 3);
  Buf back({bounds, fs, Layout::Soa(1)}, 4);
  auto put = r.Copy({.src = src.Ref(sys), .dst = file("in.bin", Layout::Aos(1))});
  REQUIRE(put.ok());
  REQUIRE(put->Wait().ok());
  auto through =
      r.Copy({.src = file("in.bin", Layout::Aos(1)),
              .dst = file("out.bin", Layout::Soa(1)),
              .via = {{zcm, Layout::Aos(1)}, {gpu, Layout::Soa(1)}, {zcm, Layout::Soa(1)}}});
  REQUIRE(through.ok());
  REQUIRE(through->Wait().ok());
  CHECK(through->chunks() >= 32);
  auto get = r.Copy({.src = file("out.bin", Layout::Soa(1)), .dst = back.Ref(sys)});
  REQUIRE(get.ok());
  REQUIRE(get->Wait().ok());
  CHECK(CheckCopy(src.shape, src.bytes, back.shape, back.bytes, back.before, bounds) == "");
  // No channel reads a file straight into a GPU: a forced path that asks
  // for it is refused, naming the hop.
  auto direct = r.Copy({.src = file("in.bin", Layout::Aos(1)),
                        .dst = back.Ref(sys),
                        .via = {{gpu, Layout::Aos(1)}}});
  REQUIRE_FALSE(direct.ok());
  CHECK_THAT(std::string(direct.status().message()),
             Catch::Contains("no channel connects memory 'dsk0' to 'gpu0'"));
  for (const MemoryUsage& m : r.Memories()) {
    INFO(m.name);
    CHECK(m.largest_buffer <= th);
    CHECK(m.staging_used == 0);
  }
}

}  // namespace ISOMETRY_TEST_FILE
