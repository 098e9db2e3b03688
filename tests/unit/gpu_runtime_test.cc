// The runtime over GPU memories, on a real GPU: FBM staging rings
// (cudaMalloc), pinned ZCM rings, and the CUDA channels, driven as the
// daemon drives them (the node's config through ResolveGpus with the
// probe's inventory, Runtime::Create with the factory's channels). Every
// case skips (exit 77, ctest SKIP_RETURN_CODE) with the probe's reason
// where no GPU is visible: these cases never pass on a machine without one.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <thread>

#include "channels/added_channels.h"
#include "channels/channel_factory.h"
#include "daemon/runtime/runtime.h"
#include "unit/gpu_test_buffers.h"
#include "unit/skip.h"
#include "unit/temp_dir.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// What the daemon runs on this machine: the default config with its GPUs
// (gpu0, ...) added, TH and request sizes small so copies take many chunks.
Result<RuntimeConfig> GpuNodeConfig(uint64_t th, const std::string& disk_dir = "") {
  RuntimeConfig c = DefaultRuntimeConfig();
  if (!disk_dir.empty()) AddDiskMemory(c, disk_dir);
  c.space_threshold = th;
  for (ChannelConfig& ch : c.channels) ch.request_bytes = 64 << 10;
  GpuConfig gpu;
  gpu.request_bytes = 64 << 10;
  ISO_RETURN_IF_ERROR(ResolveGpus(c, gpu, DetectGpus()).status());
  return c;
}

#define ISOMETRY_REQUIRE_GPU()                                 \
  do {                                                         \
    const GpuInventory inv = DetectGpus();                     \
    if (inv.memory_bytes.empty()) ISOMETRY_SKIP(inv.why_none); \
  } while (false)

using Buf = GpuTestBuf;

void CheckBuffersFreedWithin(Runtime& r, uint64_t th) {
  for (const MemoryUsage& m : r.Memories()) {
    INFO(m.name);
    CHECK(m.largest_buffer <= th);
    CHECK(m.staging_used == 0);
  }
}

}  // namespace

TEST_CASE("random layout pairs round-trip host -> GPU -> host", "[may_skip][host_gpu_host]") {
  ISOMETRY_REQUIRE_GPU();
  const uint64_t th = 256 << 10;
  auto config = GpuNodeConfig(th);
  REQUIRE(config.ok());
  auto rt = Runtime::Create(*config);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), zcm = *r.FindMemory("zcm0");
  const MemoryId gpu = *r.FindMemory("gpu0");
  std::mt19937_64 rng(15);
  for (int i = 0; i < 60; ++i) {
    const int dims = 1 + i % 3;
    const Box bounds = RandomBounds(rng, dims, dims == 1 ? 50000 : (dims == 2 ? 300 : 40));
    const FieldSpace fs = RandomFields(rng, 6);
    Buf src({bounds, fs, RandomLayout(rng, bounds)}, static_cast<uint64_t>(i));
    Buf dst({bounds, fs, RandomLayout(rng, bounds)}, 500u + static_cast<uint64_t>(i));
    // Pageable host memory on even cases, pinned staging on odd ones.
    std::vector<HopSpec> via;
    if (i % 2) via.push_back({zcm, SmallBlocks(rng, bounds)});
    via.push_back({gpu, SmallBlocks(rng, bounds)});
    if (i % 2) via.push_back({zcm, SmallBlocks(rng, bounds)});
    INFO("case " << i << ": " << src.shape.layout.ToString() << " -> gpu0 "
                 << via[i % 2].layout.ToString() << " -> " << dst.shape.layout.ToString());
    auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .via = via});
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    CHECK(t->path().edges[i % 2 ? 1 : 0].kind == ChannelKind::kGpuWrite);
    REQUIRE(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, bounds) == "");
  }
  CheckBuffersFreedWithin(r, th);
}

TEST_CASE("random layout pairs convert GPU -> GPU on the GPU", "[may_skip][gpu_gpu]") {
  ISOMETRY_REQUIRE_GPU();
  const uint64_t th = 256 << 10;
  auto config = GpuNodeConfig(th);
  REQUIRE(config.ok());
  auto rt = Runtime::Create(*config);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), gpu = *r.FindMemory("gpu0");
  std::mt19937_64 rng(16);
  for (int i = 0; i < 60; ++i) {
    const int dims = 1 + i % 3;
    const Box bounds = RandomBounds(rng, dims, dims == 1 ? 50000 : (dims == 2 ? 300 : 40));
    const FieldSpace fs = RandomFields(rng, 6);
    Buf src({bounds, fs, RandomLayout(rng, bounds)}, static_cast<uint64_t>(i));
    Buf dst({bounds, fs, RandomLayout(rng, bounds)}, 900u + static_cast<uint64_t>(i));
    const std::vector<HopSpec> via{{gpu, SmallBlocks(rng, bounds)},
                                   {gpu, SmallBlocks(rng, bounds)}};
    INFO("case " << i << ": gpu0 " << via[0].layout.ToString() << " -> gpu0 "
                 << via[1].layout.ToString());
    auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .via = via});
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    REQUIRE(t->path().edges.size() == 3);
    CHECK(t->path().edges[1].kind == ChannelKind::kGpuCopy);
    REQUIRE(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, bounds) == "");
  }
  CheckBuffersFreedWithin(r, th);
}

TEST_CASE("DSK -> FBM -> DSK pipelines with TH far below the instance", "[may_skip][dsk_fbm]") {
  ISOMETRY_REQUIRE_GPU();
  TempDir dir;
  const uint64_t th = 128 << 10;
  auto config = GpuNodeConfig(th, dir.path);
  REQUIRE(config.ok());
  auto rt = Runtime::Create(*config);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  const MemoryId gpu = *r.FindMemory("gpu0"), zcm = *r.FindMemory("zcm0");
  const Box bounds = Box::FromExtents({1 << 20});
  const FieldSpace fs = FieldSpace::Uniform(2, 4);  // 8 MiB: 64 x TH
  Buf src({bounds, fs, Layout::Aos(1)}, 3);
  Buf back({bounds, fs, Layout::Soa(1)}, 4);
  auto file = [&](const char* name, const Layout& l) {
    InstanceRef f;
    f.memory = dsk;
    f.shape = {bounds, fs, l};
    f.file = name;
    return f;
  };
  auto put = r.Copy({.src = src.Ref(sys), .dst = file("in.bin", Layout::Aos(1))});
  REQUIRE(put.ok());
  REQUIRE(put->Wait().ok());
  // The file through the GPU into another file, converted on the way in:
  // dsk0 -> zcm0 -> gpu0 -> zcm0 -> dsk0, every ring far below the file.
  auto through =
      r.Copy({.src = file("in.bin", Layout::Aos(1)),
              .dst = file("out.bin", Layout::Soa(1)),
              .via = {{zcm, Layout::Aos(1)}, {gpu, Layout::Soa(1)}, {zcm, Layout::Soa(1)}}});
  REQUIRE(through.ok());
  REQUIRE(through->Wait().ok());
  INFO(through->path().ToString(r.topology()));
  REQUIRE(through->path().edges.size() == 4);
  CHECK(through->path().edges[0].kind == ChannelKind::kDiskRead);
  CHECK(through->path().edges[1].kind == ChannelKind::kGpuWrite);
  CHECK(through->path().edges[2].kind == ChannelKind::kGpuRead);
  CHECK(through->path().edges[3].kind == ChannelKind::kDiskWrite);
  CHECK(through->chunks() >= 64);
  auto get = r.Copy({.src = file("out.bin", Layout::Soa(1)), .dst = back.Ref(sys)});
  REQUIRE(get.ok());
  REQUIRE(get->Wait().ok());
  CHECK(CheckCopy(src.shape, src.bytes, back.shape, back.bytes, back.before, bounds) == "");
  CheckBuffersFreedWithin(r, th);
  for (const MemoryUsage& m : r.Memories()) {
    if (m.name == "gpu0") CHECK(m.largest_buffer > 0);  // the GPU's ring was used
  }
}

TEST_CASE("a high-priority GPU copy behind 8 large low-priority ones is dispatched first",
          "[may_skip][gpu_priority]") {
  ISOMETRY_REQUIRE_GPU();
  auto config = GpuNodeConfig(32 << 20);
  REQUIRE(config.ok());
  // Four ring slots hold the high copy's four chunks, so each is ready
  // whenever the channel picks. With the default two, its third chunk waits
  // for the first to leave the GPU's ring, and the channel rightly sends
  // low requests meanwhile (seen on an H200: two between its chunks).
  config->slots_per_buffer = 4;
  for (ChannelConfig& c : config->channels) {
    c.request_bytes = 4 << 20;
    // A cap keeps the low-priority work queued however fast the GPU is.
    if (c.kind == ChannelKind::kGpuWrite) c.rate_limit_bytes_per_s = 1ull << 30;
  }
  auto rt = Runtime::Create(*config);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), gpu = *r.FindMemory("gpu0");
  size_t write_channel = 0;
  for (size_t c = 0; c < config->channels.size(); ++c) {
    if (config->channels[c].kind == ChannelKind::kGpuWrite) write_channel = c;
  }
  const FieldSpace fs = FieldSpace::Uniform(1, 8);
  Buf hs({Box::FromExtents({1 << 21}), fs, Layout::Aos(1)}, 7);  // 16 MiB: 4 requests
  Buf hd(hs.shape, 8);
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<Transfer> low;
  for (int i = 0; i < 8; ++i) {
    // Raw pointers: a reference to the vector's element would dangle once
    // the next emplace_back grows it.
    Buf* s =
        bufs.emplace_back(std::make_unique<Buf>(
                              InstanceShape{Box::FromExtents({4 << 20}), fs, Layout::Aos(1)}, i))
            .get();
    Buf* d = bufs.emplace_back(std::make_unique<Buf>(s->shape, 100 + i)).get();
    auto t = r.Copy({.src = s->Ref(sys),
                     .dst = d->Ref(sys),
                     .options = {.priority = 0},
                     .via = {{gpu, Layout::Aos(1)}}});
    REQUIRE(t.ok());
    low.push_back(*t);
  }
  while (r.Channels()[write_channel].requests_done < 2) std::this_thread::yield();
  auto high = r.Copy({.src = hs.Ref(sys),
                      .dst = hd.Ref(sys),
                      .options = {.priority = 10},
                      .via = {{gpu, Layout::Aos(1)}}});
  REQUIRE(high.ok());
  REQUIRE(high->Wait().ok());
  for (Transfer& t : low) REQUIRE(t.Wait().ok());
  REQUIRE(high->chunks() == 4);
  const TransferTimes ht = high->times();
  // On the GPUWrite channel (the first hop), the high-priority copy's
  // requests went out next and back to back.
  CHECK(ht.dispatch_seq_at_first == ht.dispatch_seq_at_submit + 1);
  CHECK(ht.dispatch_seq_at_last == ht.dispatch_seq_at_first + high->chunks() - 1);
  int overtaken = 0;
  for (Transfer& t : low) {
    if (t.times().dispatch_seq_at_last > ht.dispatch_seq_at_last) ++overtaken;
  }
  CHECK(overtaken >= 1);
  CHECK(CheckCopy(hs.shape, hs.bytes, hd.shape, hd.bytes, hd.before, hs.shape.bounds) == "");
}

}  // namespace ISOMETRY_TEST_FILE
