// GPU memories in the config (config/gpu_config.h): [gpu] parsing, FBM
// validation, and ResolveGpus against synthetic inventories (what the
// CUDA probe would report), so both machines, with and without GPUs, are
// tested here.
#include "config/gpu_config.h"

#include <catch2/catch.hpp>

#include "channels/added_channels.h"
#include "channels/channel_edges.h"
#include "config/config_origin.h"
#include "config/config_parser.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// Two 80 GiB GPUs with peer access both ways, or one without peers.
GpuInventory TwoGpus(bool peers) {
  return {{80ull << 30, 80ull << 30}, {{false, peers}, {peers, false}}, ""};
}
const GpuInventory kNoGpu{{}, {}, "no GPU: CUDA driver version is insufficient"};

const ChannelConfig* FindChannel(const RuntimeConfig& c, ChannelKind kind) {
  for (const ChannelConfig& ch : c.channels) {
    if (ch.kind == kind) return &ch;
  }
  return nullptr;
}

std::string KeyOf(const Status& s) { return ConfigKeyOf(s).value_or(""); }

}  // namespace

TEST_CASE("without a GPU nothing is added, and configured GPU memories and channels are refused") {
  Result<Config> def = ParseConfig(EmbeddedDefaultConfig(), "<default>");
  REQUIRE(def.ok());
  CHECK(def->gpu.auto_memories);
  RuntimeConfig rc = def->runtime;
  const size_t memories = rc.memories.size(), channels = rc.channels.size();
  Result<std::string> added = ResolveGpus(rc, def->gpu, kNoGpu);
  REQUIRE(added.ok());
  CHECK(*added == "");
  CHECK(rc.memories.size() == memories);
  CHECK(rc.channels.size() == channels);

  RuntimeConfig fbm = def->runtime;
  MemoryConfig g;
  g.name = "gpu0";
  g.kind = MemoryKind::kFbm;
  g.device = 0;
  fbm.memories.push_back(g);
  REQUIRE(fbm.Validate().ok());  // the file alone is fine; the machine is not
  Status s = ResolveGpus(fbm, def->gpu, kNoGpu).status();
  CHECK(KeyOf(s) == "memory[3].kind");
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("memory 'gpu0' is GPU memory (FBM), but this machine has no usable "
                             "GPU: no GPU: CUDA driver version is insufficient"));

  RuntimeConfig ch = def->runtime;
  ChannelConfig c;
  c.name = "up";
  c.kind = ChannelKind::kGpuWrite;
  ch.channels.push_back(c);
  s = ResolveGpus(ch, def->gpu, kNoGpu).status();
  CHECK(KeyOf(s) == "channel[2].kind");
  CHECK_THAT(std::string(s.message()), Catch::Contains("channel 'up' (gpu_write) needs a GPU"));
}

TEST_CASE("with GPUs the default gains one FBM memory per device and the GPU channels") {
  Result<Config> def = ParseConfig(EmbeddedDefaultConfig(), "<default>");
  REQUIRE(def.ok());
  RuntimeConfig rc = def->runtime;
  Result<std::string> added = ResolveGpus(rc, def->gpu, TwoGpus(/*peers=*/true));
  REQUIRE(added.ok());
  CHECK_THAT(*added, Catch::Contains("gpu0 (FBM, device 0, staging 256 MiB)"));
  CHECK_THAT(*added, Catch::Contains("gpu1 (FBM, device 1"));
  REQUIRE(rc.memories.size() == 5);
  CHECK(rc.memories[3].name == "gpu0");
  CHECK(rc.memories[3].kind == MemoryKind::kFbm);
  CHECK(rc.memories[4].device == 1);
  CHECK(rc.memories[4].staging_bytes == (256ull << 20));
  const ChannelConfig* up = FindChannel(rc, ChannelKind::kGpuWrite);
  const ChannelConfig* down = FindChannel(rc, ChannelKind::kGpuRead);
  const ChannelConfig* copy = FindChannel(rc, ChannelKind::kGpuCopy);
  REQUIRE(up);
  REQUIRE(down);
  REQUIRE(copy);
  CHECK(up->name == "gpu_write0");
  CHECK(up->max_in_flight == 4);
  CHECK(up->request_bytes == (16ull << 20));
  // Every host memory to every GPU and back; GPU to GPU with peer access.
  CHECK(ChannelEdges(rc, *up).size() == 6);  // 3 host memories x 2 GPUs
  CHECK(ChannelEdges(rc, *down).size() == 6);
  using E = std::pair<std::string, std::string>;
  CHECK(copy->edges ==
        std::vector<E>{{"gpu0", "gpu0"}, {"gpu0", "gpu1"}, {"gpu1", "gpu0"}, {"gpu1", "gpu1"}});
  // Memcpy stays among host memories: no GPU memory is one.
  for (const auto& [s, d] : ChannelEdges(rc, rc.channels[0])) {
    CHECK(s.rfind("gpu", 0) == std::string::npos);
    CHECK(d.rfind("gpu", 0) == std::string::npos);
  }
  CHECK(rc.Validate().ok());
  CHECK(CheckChannelKinds(rc).ok());

  // Without peer access, GPU copies stay within a device.
  RuntimeConfig apart = def->runtime;
  REQUIRE(ResolveGpus(apart, def->gpu, TwoGpus(/*peers=*/false)).ok());
  CHECK(FindChannel(apart, ChannelKind::kGpuCopy)->edges ==
        std::vector<E>{{"gpu0", "gpu0"}, {"gpu1", "gpu1"}});

  // gpu.auto_memories = false adds nothing.
  GpuConfig off = def->gpu;
  off.auto_memories = false;
  RuntimeConfig none = def->runtime;
  REQUIRE(ResolveGpus(none, off, TwoGpus(true)).ok());
  CHECK(none.memories.size() == 3);
  CHECK(none.channels.size() == 2);
}

TEST_CASE("configured FBM memories are checked against the devices found") {
  const char* text = R"(
[gpu]
staging = "1GiB"
[[memory]]
name = "sys0"
[[memory]]
name = "dev"
kind = "FBM"
device = 1
staging = "128MiB"
[[channel]]
name = "memcpy0"
)";
  Result<Config> c = ParseConfig(text, "t.toml");
  REQUIRE(c.ok());
  CHECK(c->gpu.staging_bytes == (1ull << 30));
  RuntimeConfig rc = c->runtime;
  REQUIRE(ResolveGpus(rc, c->gpu, TwoGpus(true)).ok());
  // The file's FBM memory stands; no gpu<i> is added beside it, but the
  // channels reach it.
  REQUIRE(rc.memories.size() == 2);
  CHECK(FindChannel(rc, ChannelKind::kGpuWrite) != nullptr);
  CHECK(FindChannel(rc, ChannelKind::kGpuCopy)->edges ==
        std::vector<std::pair<std::string, std::string>>{{"dev", "dev"}});

  GpuInventory one{{80ull << 30}, {{false}}, ""};
  RuntimeConfig missing = c->runtime;
  Status s = ResolveGpus(missing, c->gpu, one).status();
  CHECK(KeyOf(s) == "memory[1].device");
  CHECK_THAT(std::string(s.message()), Catch::Contains("names GPU 1; this machine has 1"));
  // The origin points the error at the line of `device`.
  CHECK_THAT(std::string(c->origin.Locate(s).message()), Catch::Contains("t.toml:9:"));

  GpuInventory small{{64ull << 20, 64ull << 20}, {{false, false}, {false, false}}, ""};
  RuntimeConfig big = c->runtime;
  s = ResolveGpus(big, c->gpu, small).status();
  CHECK(KeyOf(s) == "memory[1].staging");

  // A name the added memories would take is refused, naming the switch.
  RuntimeConfig clash = c->runtime;
  clash.memories[1].kind = MemoryKind::kSys;
  clash.memories[1].device = -1;
  clash.memories[1].name = "gpu0";
  s = ResolveGpus(clash, c->gpu, TwoGpus(true)).status();
  CHECK(KeyOf(s) == "gpu.auto_memories");
}

TEST_CASE("[gpu] and FBM keys are parsed and checked with file and line") {
  auto error = [](const char* text) {
    Result<Config> c = ParseConfig(text, "g.toml");
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  CHECK_THAT(error("[gpu]\nstagin = 5\n"), Catch::Contains("g.toml:2: key 'gpu.stagin': unknown"));
  CHECK_THAT(error("[gpu]\nauto_memories = \"yes\"\n"),
             Catch::Contains("g.toml:2: key 'gpu.auto_memories': must be true or false"));
  CHECK_THAT(error("[gpu]\nmax_in_flight = 0\n"),
             Catch::Contains("g.toml:2: key 'gpu.max_in_flight'"));
  CHECK_THAT(error("[gpu]\nrequest_size = \"1KiB\"\n[[memory]]\nname = \"a\"\n[[channel]]\nname = "
                   "\"c\"\n"),
             Catch::Contains("g.toml:2: key 'gpu.request_size'"));
  CHECK_THAT(error("[[memory]]\nname = \"a\"\nkind = \"FBM\"\ndevice = -1\n"),
             Catch::Contains("g.toml:4: key 'memory.device'"));
  // A GPU channel whose edges leave the GPU is refused as any misfit edge
  // (by its kind's descriptor: channels/channel_edges.h).
  Result<Config> misfit = ParseConfig(
      "[[memory]]\nname = \"a\"\n[[memory]]\nname = \"g\"\nkind = \"FBM\"\ndevice = "
      "0\n[[channel]]\nname = \"c\"\nkind = \"gpu_read\"\nedges = [[\"a\", \"g\"]]\n",
      "g.toml");
  REQUIRE(misfit.ok());
  CHECK_THAT(misfit->origin.Locate(CheckChannelKinds(misfit->runtime)).ToString(),
             Catch::Contains("g.toml:10: key 'channel.edges': channel 'c' (gpu_read) cannot serve "
                             "a -> g"));
}

}  // namespace ISOMETRY_TEST_FILE
