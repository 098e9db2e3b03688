// Runtime calibration (daemon/runtime/runtime_calibration.cc): the curves
// a Memcpy channel is measured with, kept in the calibration file and put
// on the graph's edges; files from before those curves existed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <vector>

#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/ring_stores.h"
#include "daemon/runtime/runtime.h"
#include "unit/temp_dir.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

RuntimeConfig Calibrated(const std::string& file) {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.calibrate = true;
  c.calibration_file = file;
  c.calibration_budget_ms = 600;
  return c;
}

// The plan of a plain 64 MiB copy and of an AOS -> SOA of 8 4-byte fields
// within sys0.
std::pair<Path, Path> Plans(const Runtime& rt, std::vector<std::byte>& a,
                            std::vector<std::byte>& b) {
  const MemoryId sys = *rt.FindMemory("sys0");
  const InstanceShape aos{Box::FromExtents({2 << 20}), FieldSpace::Uniform(8, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  a.resize(aos.total_bytes());
  b.resize(aos.total_bytes());
  auto plain = rt.Plan({sys, a.data(), a.size(), aos}, {sys, b.data(), b.size(), aos});
  auto conv = rt.Plan({sys, a.data(), a.size(), aos}, {sys, b.data(), b.size(), soa});
  REQUIRE(plain.ok());
  REQUIRE(conv.ok());
  return {*plain, *conv};
}

}  // namespace

TEST_CASE("a Memcpy channel is calibrated for plain copies and many-field conversions too") {
  TempDir state;
  const RuntimeConfig c = Calibrated(state.File("calibration.toml"));
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  auto cal = LoadCalibration(c.calibration_file, HardwareFingerprint(c));
  REQUIRE(cal.ok());
  REQUIRE(cal->count("memcpy0") == 1);
  REQUIRE(cal->count(ContiguousCurve("memcpy0")) == 1);
  REQUIRE(cal->count(Fields8Curve("memcpy0")) == 1);
  CHECK(cal->at(ContiguousCurve("memcpy0")).size() == ContiguousCalibrationSizes().size());
  CHECK(cal->at(Fields8Curve("memcpy0")).back().request_bytes == kFields8MaxRun);
  // The edges carry them, and the plans read them: a plain copy its
  // contiguous curve at the copy's size, the conversion (8 fields of 4 B:
  // 4-byte runs) the 8-field curve at 4 bytes.
  std::vector<std::byte> a, b;
  const auto [plain, conv] = Plans(**rt, a, b);
  REQUIRE(plain.edges.size() == 1);
  REQUIRE(plain.edges[0].tp_contiguous.has_value());
  REQUIRE(conv.edges[0].tp_fields8.has_value());
  CHECK(plain.predicted_bps == Approx(plain.edges[0].tp_contiguous->At(64ull << 20)));
  CHECK(conv.run_bytes[0] == 4);
  CHECK(conv.predicted_bps == Approx(conv.edges[0].tp_fields8->At(4)));
  // Once per node: every core copying at once, on the Memcpy edges.
  REQUIRE(cal->count(kNodeCopyCurve) == 1);
  REQUIRE(cal->at(kNodeCopyCurve).size() == 1);
  const double node_bps = cal->at(kNodeCopyCurve).front().bytes_per_s;
  CHECK(node_bps > 0);
  CHECK(plain.edges[0].node_copy_bps == Approx(node_bps));
  // And the pipelined pair, through the runtime's ring: slots_per_buffer
  // slots of the channel's request size (at most TH / slots_per_buffer).
  REQUIRE(cal->count(kNodePipeCurve) == 1);
  REQUIRE(cal->at(kNodePipeCurve).size() == 1);
  const RateSample pipe = cal->at(kNodePipeCurve).front();
  CHECK(pipe.bytes_per_s > 0);
  CHECK(pipe.request_bytes ==
        std::min(c.channels[0].request_bytes,
                 c.space_threshold / static_cast<uint64_t>(c.slots_per_buffer)));
  // Measured twice: with cached and with streaming stores into the ring;
  // the edges take the faster.
  REQUIRE(cal->count(kNodePipeStreamedCurve) == 1);
  const RateSample streamed = cal->at(kNodePipeStreamedCurve).front();
  CHECK(streamed.bytes_per_s > 0);
  CHECK(streamed.request_bytes == pipe.request_bytes);
  CHECK(plain.edges[0].node_pipe_bps == Approx(std::max(pipe.bytes_per_s, streamed.bytes_per_s)));
}

TEST_CASE("a calibration file without the newer curves still loads and plans") {
  TempDir state;
  const RuntimeConfig c = Calibrated(state.File("calibration.toml"));
  // As an earlier daemon of the same method wrote it: one curve a channel.
  std::ofstream(c.calibration_file)
      << "fingerprint = \"" << HardwareFingerprint(c) << "\"\n[channel]\n"
      << "memcpy0 = [[1, 1.0e9], [67108864, 8.0e9]]\n";
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  std::vector<std::byte> a, b;
  const auto [plain, conv] = Plans(**rt, a, b);
  CHECK_FALSE(plain.edges[0].tp_contiguous.has_value());
  CHECK_FALSE(conv.edges[0].tp_fields8.has_value());
  // Both read the run-size curve from the file (4 MiB requests for the
  // plain copy: the channel's request size).
  CHECK(plain.predicted_bps == Approx(plain.edges[0].tp.At(4 << 20)));
  CHECK(plain.predicted_bps > 1e9);
  CHECK(conv.predicted_bps == Approx(plain.edges[0].tp.At(4)));
}

namespace {

// Copies larger than this stream their last hop here (RuntimeConfig::
// stream_above_bytes): a machine's own last-level cache can be hundreds of
// MiB, and copies twice its size took half a minute under the sanitizers.
constexpr uint64_t kStreamAbove = 32ull << 20;

// A runtime whose calibration file says how fast a pipelined pair of
// memcpy hops moves with cached and with streaming stores into its ring,
// cutting copies into chunks of `chunk_bytes` (the memcpy channel's
// request size, with a TH and a ring memory that hold two of them).
std::unique_ptr<Runtime> WithPipeRates(const TempDir& state, double cached, double streamed,
                                       uint64_t chunk_bytes = 4ull << 20) {
  RuntimeConfig c = Calibrated(state.File("calibration.toml"));
  c.stream_above_bytes = kStreamAbove;
  const uint64_t ring = static_cast<uint64_t>(c.slots_per_buffer) * chunk_bytes;
  c.channels[0].request_bytes = chunk_bytes;
  c.space_threshold = ring;  // a slot a chunk: copies through memcpy hops are cut into slots
  c.memories[1].staging_bytes = std::max<uint64_t>(64ull << 20, ring);
  std::ofstream(c.calibration_file)
      << "fingerprint = \"" << HardwareFingerprint(c) << "\"\n[channel]\n"
      << "memcpy0 = [[1, 1.0e9], [67108864, 8.0e9]]\n"
      << "\":node_pipe\" = [[4194304, " << cached << "]]\n"
      << "\":node_pipe_streamed\" = [[4194304, " << streamed << "]]\n";
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  return *std::move(rt);
}

struct RingWrites {
  uint64_t chunks = 0;    // of the ring
  uint64_t streamed = 0;  // of those, written with streaming stores
  uint64_t epochs = 0;    // epochs of them timed (ring_stores.h)
};

// The size of a copy that streams at all (larger than kStreamAbove) and
// is at least `at_least` bytes.
uint64_t StreamingCopyBytes(uint64_t at_least = 64ull << 20) {
  return std::max<uint64_t>(2 * kStreamAbove, at_least);
}

// A two-hop copy of StreamingCopyBytes(at_least) through reg0's ring: the
// bytes arrive, and how the ring was written.
RingWrites RingWritesOfCopy(Runtime& rt, uint64_t at_least = 64ull << 20) {
  const MemoryId sys = *rt.FindMemory("sys0"), reg = *rt.FindMemory("reg0");
  const uint64_t bytes = StreamingCopyBytes(at_least);
  const InstanceShape shape{Box::FromExtents({static_cast<int64_t>(bytes)}),
                            FieldSpace::Uniform(1, 1), Layout::Aos(1)};
  std::vector<std::byte> src(bytes), dst(bytes);
  for (uint64_t i = 0; i < bytes; ++i) src[i] = static_cast<std::byte>(i * 131 + (i >> 20));
  const RuntimeStats before = rt.Stats();
  auto t = rt.Copy({.src = {sys, src.data(), bytes, shape},
                    .dst = {sys, dst.data(), bytes, shape},
                    .via = {{reg, shape.layout}}});
  REQUIRE(t.ok());
  REQUIRE(t->Wait().ok());
  REQUIRE(t->Summary().path);
  CHECK(t->Summary().path->nodes.size() == 3);  // through the ring
  CHECK(std::memcmp(src.data(), dst.data(), bytes) == 0);
  const RuntimeStats after = rt.Stats();
  return {t->Summary().chunks, after.ring_requests_streamed - before.ring_requests_streamed,
          after.ring_epochs_timed - before.ring_epochs_timed};
}

}  // namespace

// Where cores share no cache, streaming stores into the ring make a two-hop
// copy faster (docs/benchmarks/design-measurements.md, "Copy loops and
// plans"); where they share one, cached stores hand the ring over there.
// Calibration measures both; the runtime starts writing rings the faster
// way and plans with that figure. The copies here are 16 chunks, too short
// for their epochs to be timed (a longer one tries the other way from its
// third epoch on and follows what it measures, below), so every chunk goes
// the calibrated way (chunks of a sixteenth of the copy).
TEST_CASE("rings are written with streaming stores where calibration found that faster") {
  TempDir state;
  const uint64_t chunk = (StreamingCopyBytes() / 16 + 4095) / 4096 * 4096;
  auto rt = WithPipeRates(state, 5e9, 9e9, chunk);
  std::vector<std::byte> a, b;
  CHECK(Plans(*rt, a, b).first.edges[0].node_pipe_bps == Approx(9e9));
  const RingWrites w = RingWritesOfCopy(*rt);
  REQUIRE(w.chunks < 3 * RingStores::kEpochChunks);
  CHECK(w.epochs == 0);
  CHECK(w.streamed == w.chunks);
}

TEST_CASE("rings are written with cached stores where calibration found those faster") {
  TempDir state;
  const uint64_t chunk = (StreamingCopyBytes() / 16 + 4095) / 4096 * 4096;
  auto rt = WithPipeRates(state, 9e9, 5e9, chunk);
  std::vector<std::byte> a, b;
  CHECK(Plans(*rt, a, b).first.edges[0].node_pipe_bps == Approx(9e9));
  const RingWrites w = RingWritesOfCopy(*rt);
  REQUIRE(w.chunks < 3 * RingStores::kEpochChunks);
  CHECK(w.epochs == 0);
  CHECK(w.streamed == 0);
}

// A ring between two memcpy hops is written in epochs, and each epoch's
// arrival is timed: in a copy of three epochs or more, the third is
// written the way not preferred, so that whichever is faster on this
// machine gets found; each way's bytes arrive whole.
TEST_CASE("a ring between two memcpy hops times its epochs and tries the other way") {
  TempDir state;
  auto rt = WithPipeRates(state, 9e9, 5e9);  // cached first
  const RingWrites w = RingWritesOfCopy(*rt, 128ull << 20);
  REQUIRE(w.chunks >= 3 * RingStores::kEpochChunks);
  // Every whole epoch but the first, which has no start to time from.
  CHECK(w.epochs == w.chunks / RingStores::kEpochChunks - 1);
  CHECK(w.streamed >= RingStores::kEpochChunks);                 // the third epoch, at least
  CHECK(w.streamed <= w.chunks - 2 * RingStores::kEpochChunks);  // never the first two
}

}  // namespace ISOMETRY_TEST_FILE
