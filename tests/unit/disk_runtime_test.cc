// DSK memories through the runtime: files as transfer endpoints, layout
// conversion on Memcpy before the disk, durability and failure cleanup.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "channels/added_channels.h"
#include "channels/channel_factory.h"
#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/runtime.h"
#include "unit/temp_dir.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
namespace fs = std::filesystem;

namespace {

RuntimeConfig DiskConfig(const std::string& dir) {
  RuntimeConfig c = DefaultRuntimeConfig();
  AddDiskMemory(c, dir);
  c.space_threshold = 4 << 20;
  return c;
}

InstanceRef FileRefTo(MemoryId dsk, const std::string& name, const InstanceShape& shape,
                      uint64_t offset = 0) {
  InstanceRef r;
  r.memory = dsk;
  r.shape = shape;
  r.file = name;
  r.file_offset = offset;
  return r;
}

std::vector<std::byte> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(raw.size());
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

uint64_t StagingUsed(const Runtime& rt) {
  uint64_t used = 0;
  for (const MemoryUsage& m : rt.Memories()) used += m.staging_used;
  return used;
}

}  // namespace

TEST_CASE("layout families round-trip through files byte-exactly") {
  TempDir dir;
  auto rt = Runtime::Create(DiskConfig(dir.path));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  std::mt19937_64 rng(4);
  for (int i = 0; i < 40; ++i) {
    const Box bounds = RandomBounds(rng, 1 + i % 3, i % 3 == 0 ? 3000 : 60);
    const FieldSpace fs = RandomFields(rng, 5);
    const InstanceShape src{bounds, fs, RandomLayout(rng, bounds)};
    const InstanceShape file{bounds, fs, RandomLayout(rng, bounds)};
    const InstanceShape back{bounds, fs, RandomLayout(rng, bounds)};
    const uint64_t offset = (i % 2) ? 4096 * (i % 3) : 123;  // aligned and not
    auto sbytes = Pattern(src.total_bytes(), static_cast<uint64_t>(i));
    auto bbytes = Pattern(back.total_bytes(), 99);
    const auto bbefore = bbytes;
    const std::string name = "case" + std::to_string(i) + ".bin";
    INFO("case " << i << ": " << src.layout.ToString() << " -> file " << file.layout.ToString()
                 << " at " << offset << " -> " << back.layout.ToString());
    auto w = r.Copy({.src = {sys, sbytes.data(), sbytes.size(), src},
                     .dst = FileRefTo(dsk, name, file, offset)});
    REQUIRE(w.ok());
    REQUIRE(w->Wait().ok());
    // The file holds the instance in the file layout, after `offset` bytes.
    const auto on_disk = ReadFile(dir.path + "/" + name);
    REQUIRE(on_disk.size() == offset + file.total_bytes());
    std::vector<std::byte> file_part(on_disk.begin() + static_cast<ptrdiff_t>(offset),
                                     on_disk.end());
    std::vector<std::byte> zeros(file.total_bytes(), std::byte{0});
    CHECK(CheckCopy(src, sbytes, file, file_part, zeros, bounds) == "");
    auto rd = r.Copy({.src = FileRefTo(dsk, name, file, offset),
                      .dst = {sys, bbytes.data(), bbytes.size(), back}});
    REQUIRE(rd.ok());
    REQUIRE(rd->Wait().ok());
    REQUIRE(CheckCopy(src, sbytes, back, bbytes, bbefore, bounds) == "");
  }
  CHECK(StagingUsed(r) == 0);
  for (const std::string& f : dir.Files()) CHECK(f.find(".isometry-") == std::string::npos);
}

TEST_CASE("a converting write converts on Memcpy, never on the disk channel (fig. 9b)") {
  TempDir dir;
  auto rt = Runtime::Create(DiskConfig(dir.path));
  REQUIRE(rt.ok());
  const MemoryId sys = *(*rt)->FindMemory("sys0"), dsk = *(*rt)->FindMemory("dsk0");
  const InstanceShape aos{Box::FromExtents({1 << 20}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  auto path = (*rt)->Plan({sys, nullptr, 0, aos}, FileRefTo(dsk, "x.bin", soa));
  REQUIRE(path.ok());
  REQUIRE(path->edges.size() == 2);
  CHECK(path->edges[0].kind == ChannelKind::kMemcpy);
  CHECK(path->edges[1].kind == ChannelKind::kDiskWrite);
  CHECK(path->nodes[1].layout == path->nodes[2].layout);  // the disk hop only moves bytes
}

TEST_CASE("a pipeline into a file rings four slots; one between files keeps the configured two") {
  TempDir dir;
  RuntimeConfig c = DiskConfig(dir.path);  // TH 4 MiB, slots_per_buffer 2
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  const InstanceShape aos{Box::FromExtents({1 << 20}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  std::vector<std::byte> host(aos.total_bytes());
  const InstanceRef src{sys, host.data(), host.size(), aos};
  // Memory into a file: four slots of a quarter of TH each, the same staging.
  auto into = r.Explain(src, FileRefTo(dsk, "soa.bin", soa));
  REQUIRE(into.ok());
  REQUIRE(into->buffer_bytes.size() == 1);
  CHECK(into->chunk_bytes == (1 << 20));
  CHECK(into->buffer_bytes[0] == 4 * into->chunk_bytes);
  // The same file transposed into another: the configured ring of two.
  REQUIRE(r.Copy({.src = src, .dst = FileRefTo(dsk, "aos.bin", aos)}).value().Wait().ok());
  const InstanceShape rows{Box::FromExtents({16, 1 << 16}), FieldSpace::Uniform(1, 16),
                           Layout::Parse("F,x,y", 2).value()};
  const InstanceShape cols{rows.bounds, rows.fields, Layout::Parse("F,y,x", 2).value()};
  auto between = r.Explain(FileRefTo(dsk, "aos.bin", rows), FileRefTo(dsk, "t.bin", cols));
  REQUIRE(between.ok());
  REQUIRE(!between->buffer_bytes.empty());
  CHECK(between->chunk_bytes == (2 << 20));
  for (uint64_t b : between->buffer_bytes) CHECK(b == 2 * between->chunk_bytes);
  // A deeper ring in the configuration is kept for both.
  c.slots_per_buffer = 8;
  auto deep = Runtime::Create(c);
  REQUIRE(deep.ok());
  auto into8 = (*deep)->Explain(src, FileRefTo(dsk, "soa.bin", soa));
  REQUIRE(into8.ok());
  CHECK(into8->buffer_bytes[0] == 8 * into8->chunk_bytes);
  auto between8 = (*deep)->Explain(FileRefTo(dsk, "aos.bin", rows), FileRefTo(dsk, "t.bin", cols));
  REQUIRE(between8.ok());
  REQUIRE(!between8->buffer_bytes.empty());
  for (uint64_t b : between8->buffer_bytes) CHECK(b == 8 * between8->chunk_bytes);
}

TEST_CASE("paths that leave the directory are refused; short files are errors") {
  TempDir dir;
  auto rt = Runtime::Create(DiskConfig(dir.path));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  const InstanceShape shape{Box::FromExtents({1000}), FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  std::vector<std::byte> mem(shape.total_bytes());
  fs::create_directories(dir.path + "/sub");
  fs::create_symlink("/tmp", dir.path + "/out");
  for (const char* bad : {"../escape.bin", "/etc/passwd", "sub/../../x.bin", "out/x.bin", ""}) {
    INFO(bad);
    auto w =
        r.Copy({.src = {sys, mem.data(), mem.size(), shape}, .dst = FileRefTo(dsk, bad, shape)});
    REQUIRE(!w.ok());
    CHECK((absl::IsPermissionDenied(w.status()) || absl::IsInvalidArgument(w.status())));
    auto rd =
        r.Copy({.src = FileRefTo(dsk, bad, shape), .dst = {sys, mem.data(), mem.size(), shape}});
    REQUIRE(!rd.ok());
  }
  CHECK(!fs::exists("/tmp/x.bin"));
  // A file shorter than the instance, and a missing one.
  std::ofstream(dir.path + "/short.bin") << "only a few bytes";
  auto s = r.Copy(
      {.src = FileRefTo(dsk, "short.bin", shape), .dst = {sys, mem.data(), mem.size(), shape}});
  REQUIRE(!s.ok());
  CHECK_THAT(std::string(s.status().message()), Catch::Contains("short.bin holds 16 bytes"));
  auto m = r.Copy(
      {.src = FileRefTo(dsk, "missing.bin", shape), .dst = {sys, mem.data(), mem.size(), shape}});
  REQUIRE(!m.ok());
  CHECK(absl::IsNotFound(m.status()));
  CHECK_THAT(std::string(m.status().message()), Catch::Contains("missing.bin"));
  // Files land in subdirectories that exist.
  auto ok = r.Copy(
      {.src = {sys, mem.data(), mem.size(), shape}, .dst = FileRefTo(dsk, "sub/in.bin", shape)});
  REQUIRE(ok.ok());
  CHECK(ok->Wait().ok());
  CHECK(fs::file_size(dir.path + "/sub/in.bin") == shape.total_bytes());
}

TEST_CASE("a failed write leaves no file that looks complete, frees every buffer") {
  TempDir dir;
  std::atomic<int> writes{0};
  // The disk-write channel's third request reports an I/O error.
  class Failing final : public Channel {
   public:
    Failing(std::unique_ptr<Channel> inner, std::atomic<int>& n)
        : inner_(std::move(inner)), n_(n) {}
    const ChannelCaps& caps() const override { return inner_->caps(); }
    void Submit(ChannelRequest req, RequestDone done) override {
      const bool fail = ++n_ == 3;
      inner_->Submit(std::move(req), [done = std::move(done), fail](Status s) {
        done(fail ? Status(absl::StatusCode::kDataLoss, "injected EIO") : std::move(s));
      });
    }

   private:
    std::unique_ptr<Channel> inner_;
    std::atomic<int>& n_;
  };
  auto maker = [&](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
    ISO_ASSIGN_OR_RETURN(auto ch, MakeChannel(cc));
    if (cc.kind != ChannelKind::kDiskWrite) return ch;
    return std::unique_ptr<Channel>(new Failing(std::move(ch), writes));
  };
  RuntimeConfig c = DiskConfig(dir.path);
  c.channels[0].request_bytes = 64 << 10;
  c.channels[2].request_bytes = 64 << 10;
  auto rt = Runtime::Create(c, maker);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  const InstanceShape aos{Box::FromExtents({1 << 16}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  auto mem = Pattern(aos.total_bytes(), 1);
  // An older, complete version of the target must survive the failure.
  std::ofstream(dir.path + "/data.bin") << "previous version";
  auto t =
      r.Copy({.src = {sys, mem.data(), mem.size(), aos}, .dst = FileRefTo(dsk, "data.bin", soa)});
  REQUIRE(t.ok());
  const Status s = t->Wait();
  REQUIRE(!s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("injected EIO"));
  CHECK(StagingUsed(r) == 0);
  CHECK(dir.Files() == std::vector<std::string>{"data.bin"});  // no temporary file left
  CHECK(fs::file_size(dir.path + "/data.bin") == std::string("previous version").size());
  // The next write succeeds and replaces it.
  auto again =
      r.Copy({.src = {sys, mem.data(), mem.size(), aos}, .dst = FileRefTo(dsk, "data.bin", soa)});
  REQUIRE(again.ok());
  REQUIRE(again->Wait().ok());
  CHECK(fs::file_size(dir.path + "/data.bin") == soa.total_bytes());
}

TEST_CASE("concurrent readers and writers on different files, through the runtime") {
  TempDir dir;
  auto rt = Runtime::Create(DiskConfig(dir.path));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = *r.FindMemory("sys0"), dsk = *r.FindMemory("dsk0");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const InstanceShape shape{Box::FromExtents({300000 + k * 17}), FieldSpace::Uniform(3, 4),
                                Layout::Aos(1)};
      const InstanceShape file{shape.bounds, shape.fields, Layout::Soa(1)};
      auto src = Pattern(shape.total_bytes(), static_cast<uint64_t>(k));
      std::vector<std::byte> back(shape.total_bytes());
      const auto before = back;
      const std::string name = "t" + std::to_string(k) + ".bin";
      for (int i = 0; i < 3; ++i) {
        auto w = r.Copy({.src = {sys, src.data(), src.size(), shape},
                         .dst = FileRefTo(dsk, name, file),
                         .options = {.durable = i == 0}});
        auto rd = w.ok() && w->Wait().ok() ? r.Copy({.src = FileRefTo(dsk, name, file),
                                                     .dst = {sys, back.data(), back.size(), shape}})
                                           : Result<Transfer>(Internal("write failed"));
        if (!rd.ok() || !rd->Wait().ok() || back != src) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
}

TEST_CASE("a DSK memory whose directory is missing is refused at start") {
  auto rt = Runtime::Create(DiskConfig("/var/tmp/isometry-no-such-dir"));
  REQUIRE(!rt.ok());
  CHECK_THAT(std::string(rt.status().message()), Catch::Contains("does not exist"));
}

TEST_CASE("calibration measures the disk channels on their DSK directory and plans with it") {
  TempDir dir, state;
  RuntimeConfig c = DiskConfig(dir.path);
  c.calibrate = true;
  c.calibration_file = state.File("calibration.toml");
  c.calibration_budget_ms = 900;
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  // Kept with the others, under a fingerprint that names the directory.
  auto cal = LoadCalibration(c.calibration_file, HardwareFingerprint(c));
  REQUIRE(cal.ok());
  double lo = 1e300, hi = 0;
  for (const char* name : {"disk_read0", "disk_write0"}) {
    INFO(name);
    REQUIRE(cal->count(name) == 1);
    CHECK(cal->at(name).size() == 8);  // 4 KiB, 16 KiB, ... 64 MiB
    if (std::string(name) == "disk_write0") {
      for (const RateSample& s : cal->at(name)) {
        lo = std::min(lo, s.bytes_per_s);
        hi = std::max(hi, s.bytes_per_s);
      }
    }
  }
  CHECK(dir.Files().empty());  // the scratch files are gone
  // The planner predicts a write to the file from the measured function,
  // not from the 1 GB/s model.
  Runtime& r = **rt;
  const InstanceShape shape{Box::FromExtents({4 << 20}), FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  std::vector<std::byte> host(shape.total_bytes());
  InstanceRef src{*r.FindMemory("sys0"), host.data(), host.size(), shape};
  auto plan = r.Explain(src, FileRefTo(*r.FindMemory("dsk0"), "x.bin", shape));
  REQUIRE(plan.ok());
  CHECK(plan->path.predicted_bps >= lo * 0.999);
  CHECK(plan->path.predicted_bps <= hi * 1.001);
  // The writes are kept timed before their fdatasync too, and a copy
  // without one is predicted from those.
  REQUIRE(cal->count(UnsyncedCurve("disk_write0")) == 1);
  CHECK(cal->at(UnsyncedCurve("disk_write0")).size() == 8);
  CHECK(cal->count(UnsyncedCurve("disk_read0")) == 0);
  double unsynced_hi = 0;
  for (const RateSample& s : cal->at(UnsyncedCurve("disk_write0"))) {
    unsynced_hi = std::max(unsynced_hi, s.bytes_per_s);
  }
  auto unsynced = r.Plan(src, FileRefTo(*r.FindMemory("dsk0"), "x.bin", shape), false);
  REQUIRE(unsynced.ok());
  CHECK(unsynced->predicted_bps <= unsynced_hi * 1.001);
  CHECK(unsynced->predicted_bps >= plan->path.predicted_bps * 0.999);
  // A directory on another device (or moved) is other hardware.
  RuntimeConfig moved = c;
  moved.memories.back().directory = state.path;
  CHECK(HardwareFingerprint(moved) != HardwareFingerprint(c));
}

TEST_CASE("a copy to a file is predicted with its fdatasync only when durable") {
  TempDir dir, state;
  RuntimeConfig c = DiskConfig(dir.path);
  c.calibrate = true;
  c.calibration_file = state.File("calibration.toml");
  // Durable writes at 1 GB/s, the same writes without the sync at 3 GB/s,
  // everything else far faster: the disk write is the path's bottleneck.
  std::ofstream(c.calibration_file)
      << "fingerprint = \"" << HardwareFingerprint(c) << "\"\n[channel]\n"
      << "memcpy0 = [[1, 50.0e9], [67108864, 50.0e9]]\n"
      << "disk_read0 = [[4096, 50.0e9], [67108864, 50.0e9]]\n"
      << "disk_write0 = [[4096, 1.0e9], [67108864, 1.0e9]]\n"
      << "\"disk_write0:unsynced\" = [[4096, 3.0e9], [67108864, 3.0e9]]\n";
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const InstanceShape shape{Box::FromExtents({1 << 17}), FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  std::vector<std::byte> host(shape.total_bytes(), std::byte{7});
  const InstanceRef src{*r.FindMemory("sys0"), host.data(), host.size(), shape};
  const MemoryId dsk = *r.FindMemory("dsk0");
  for (const bool durable : {true, false}) {
    INFO("durable " << durable);
    const double expected = durable ? 1e9 : 3e9;
    auto plan = r.Plan(src, FileRefTo(dsk, "p.bin", shape), durable);
    REQUIRE(plan.ok());
    CHECK(plan->predicted_bps == Approx(expected));
    // The transfer reports the same figure, kept once it has ended.
    CopyRequest req{.src = src, .dst = FileRefTo(dsk, durable ? "d.bin" : "n.bin", shape)};
    req.options.durable = durable;
    auto t = r.Copy(std::move(req));
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    CHECK(t->Summary().predicted_bps == Approx(expected));
    CHECK(t->Summary().path->predicted_bps == Approx(1e9));  // the plan's own
  }
  // A read from the file has no such curve: its plan is the same either way.
  const InstanceRef file = FileRefTo(dsk, "d.bin", shape);
  std::vector<std::byte> back(shape.total_bytes());
  const InstanceRef dst{*r.FindMemory("sys0"), back.data(), back.size(), shape};
  CHECK(r.Plan(file, dst, false)->predicted_bps == Approx(r.Plan(file, dst)->predicted_bps));
}

}  // namespace ISOMETRY_TEST_FILE
