// The GPU channels (channels/cuda/cuda_channel.h) and the probe. The probe
// cases run everywhere; the channel cases need a GPU and, where none is
// visible, skip (exit 77) saying "no CUDA device: <the probe's reason>".
#include "channels/cuda/cuda_channel.h"

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <future>
#include <mutex>

#include "channels/cuda/cuda_probe.h"
#include "unit/cuda_test_support.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cuda;
using namespace isometry::testing;

namespace {

std::string NoGpu() {
  const GpuProbe& p = CachedGpuProbe();
  return p.gpus.empty() ? p.error : "";
}

#define REQUIRE_GPU()                           \
  do {                                          \
    const std::string why = NoGpu();            \
    if (!why.empty()) {                         \
      ISOMETRY_SKIP("no CUDA device: " << why); \
    }                                           \
  } while (false)

// Device memory for a test, filled from and read back to host vectors.
class DeviceMemory {
 public:
  DeviceMemory(int device, const std::vector<std::byte>& init) : bytes_(init.size()) {
    REQUIRE(cudaSetDevice(device) == cudaSuccess);
    REQUIRE(cudaMalloc(&ptr_, std::max<size_t>(bytes_, 1)) == cudaSuccess);
    REQUIRE(cudaMemcpy(ptr_, init.data(), bytes_, cudaMemcpyHostToDevice) == cudaSuccess);
    // cudaMemcpy from pageable memory returns once the bytes are staged,
    // before they land, and the channels' streams are non-blocking: without
    // this the fill could land after (over) the copy under test.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  ~DeviceMemory() { (void)cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  std::vector<std::byte> Read() const {
    std::vector<std::byte> out(bytes_);
    REQUIRE(cudaMemcpy(out.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
  DeviceBytes at(int device) const { return {device, reinterpret_cast<uint64_t>(ptr_)}; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

std::unique_ptr<Channel> Make(ChannelKind kind, int max_in_flight = 0) {
  ChannelConfig c;
  c.name = "gpu";
  c.kind = kind;
  c.max_in_flight = max_in_flight;
  auto ch = MakeCudaChannel(c, CachedGpuProbe());
  REQUIRE(ch.ok());
  return std::move(*ch);
}

Status Run(Channel& c, std::shared_ptr<const CopyProgram> program, Endpoint src, Endpoint dst) {
  std::promise<Status> done;
  auto f = done.get_future();
  c.Submit({.program = std::move(program), .src = std::move(src), .dst = std::move(dst)},
           [&](Status s) { done.set_value(std::move(s)); });
  return f.get();
}

std::shared_ptr<const CopyProgram> Compile(const InstanceShape& s, const InstanceShape& d,
                                           const Box& box) {
  auto p = CompileCopy(s, d, box);
  REQUIRE(p.ok());
  return std::make_shared<const CopyProgram>(std::move(*p));
}

}  // namespace

TEST_CASE("the probe reports GPUs, or no GPU with CUDA's reason, without failing") {
  const GpuProbe p = ProbeGpus();
  if (p.gpus.empty()) {
    CHECK_THAT(p.error, Catch::StartsWith("no GPU: "));
    CHECK(p.error.size() > std::string("no GPU: ").size());
    CHECK(p.Summary() == p.error);
  } else {
    CHECK(p.peer_access.size() == p.gpus.size());
    CHECK_THAT(p.Summary(), Catch::Contains("gpu0"));
    CHECK(p.gpus[0].total_memory > 0);
  }
  CHECK(SysfsNumaPath("00000000:3B:00.0") == "/sys/bus/pci/devices/0000:3b:00.0/numa_node");
  CHECK(SysfsNumaPath("0000:3B:00.0") == "/sys/bus/pci/devices/0000:3b:00.0/numa_node");
}

TEST_CASE("without a GPU the channels are refused with the probe's reason") {
  GpuProbe none;
  none.error = "no GPU: no CUDA-capable device is detected";
  ChannelConfig c;
  c.name = "gpuw";
  c.kind = ChannelKind::kGpuWrite;
  auto ch = MakeCudaChannel(c, none);
  REQUIRE_FALSE(ch.ok());
  CHECK_THAT(std::string(ch.status().message()), Catch::Contains("no CUDA-capable device"));
  c.kind = ChannelKind::kMemcpy;
  CHECK_FALSE(MakeCudaChannel(c, none).ok());
}

TEST_CASE("random layout pairs round-trip host -> GPU -> host byte for byte",
          "[may_skip][host_device_round_trip]") {
  REQUIRE_GPU();
  auto write = Make(ChannelKind::kGpuWrite);
  auto read = Make(ChannelKind::kGpuRead);
  std::mt19937_64 rng(15);
  for (int dims = 1; dims <= 4; ++dims) {
    for (int i = 0; i < 150; ++i) {
      const RandomCopy c = MakeRandomCopy(rng, dims, i % 2 == 0);
      INFO("dims " << dims << " case " << i << ": " << c.src.layout.ToString() << " -> "
                   << c.dst.layout.ToString());
      const auto src = Pattern(c.src.total_bytes(), static_cast<uint64_t>(i));
      const auto dev_before = Pattern(c.dst.total_bytes(), static_cast<uint64_t>(i) + 1);
      DeviceMemory dev(0, dev_before);
      REQUIRE(Run(*write, Compile(c.src, c.dst, c.box),
                  HostBytes{const_cast<std::byte*>(src.data())}, dev.at(0))
                  .ok());
      const auto on_gpu = dev.Read();
      REQUIRE(CheckCopy(c.src, src, c.dst, on_gpu, dev_before, c.box) == "");
      const auto back_before = Pattern(c.src.total_bytes(), static_cast<uint64_t>(i) + 2);
      auto back = back_before;
      REQUIRE(Run(*read, Compile(c.dst, c.src, c.box), dev.at(0), HostBytes{back.data()}).ok());
      REQUIRE(CheckCopy(c.dst, on_gpu, c.src, back, back_before, c.box) == "");
    }
  }
}

TEST_CASE("random layout pairs copy GPU -> GPU byte for byte", "[may_skip][device_to_device]") {
  REQUIRE_GPU();
  auto copy = Make(ChannelKind::kGpuCopy);
  const GpuProbe& probe = CachedGpuProbe();
  // Within gpu0, and to gpu1 where it exists: through its kernel with peer
  // access, through the copy engines alone without.
  const int other = probe.gpus.size() > 1 ? 1 : 0;
  std::mt19937_64 rng(16);
  for (int dims = 1; dims <= 4; ++dims) {
    for (int i = 0; i < 150; ++i) {
      const RandomCopy c = MakeRandomCopy(rng, dims, i % 2 == 1);
      const int to = i % 2 ? other : 0;
      INFO("dims " << dims << " case " << i << " to gpu" << to << ": " << c.src.layout.ToString()
                   << " -> " << c.dst.layout.ToString());
      const auto src = Pattern(c.src.total_bytes(), static_cast<uint64_t>(i));
      const auto before = Pattern(c.dst.total_bytes(), static_cast<uint64_t>(i) + 1);
      DeviceMemory s(0, src);
      DeviceMemory d(to, before);
      const Status st = Run(*copy, Compile(c.src, c.dst, c.box), s.at(0), d.at(to));
      REQUIRE(st.ok());
      REQUIRE(CheckCopy(c.src, src, c.dst, d.Read(), before, c.box) == "");
    }
  }
}

TEST_CASE("endpoints a GPU channel cannot reach fail the request, not the channel",
          "[may_skip][wrong_endpoints]") {
  REQUIRE_GPU();
  auto write = Make(ChannelKind::kGpuWrite);
  std::vector<std::byte> host(64);
  const auto program = ContiguousProgram(64);
  const Status s = Run(*write, program, HostBytes{host.data()}, HostBytes{host.data()});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  const Status t = Run(*write, program, HostBytes{host.data()}, DeviceBytes{99, 4096});
  CHECK(t.code() == absl::StatusCode::kInvalidArgument);
  DeviceMemory dev(0, host);
  CHECK(Run(*write, program, HostBytes{host.data()}, dev.at(0)).ok());
}

TEST_CASE("a high-priority GPU copy overtakes 8 large low-priority ones", "[may_skip][priority]") {
  REQUIRE_GPU();
  auto write = Make(ChannelKind::kGpuWrite, 1);
  const uint64_t big = 64ull << 20;
  std::vector<std::byte> host(big);
  DeviceMemory dev(0, host);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::promise<void>> done(9);
  for (int i = 0; i < 9; ++i) {
    ChannelRequest r{.program = ContiguousProgram(i < 8 ? big : 4096),
                     .src = HostBytes{host.data()},
                     .dst = dev.at(0),
                     .priority = i < 8 ? 0 : 10};
    write->Submit(std::move(r), [&, i](const Status& s) {
      CHECK(s.ok());
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      done[static_cast<size_t>(i)].set_value();
    });
  }
  for (auto& d : done) d.get_future().wait();
  const auto at = std::find(order.begin(), order.end(), 8) - order.begin();
  INFO("completion position of the high-priority request: " << at);
  // At most the one low-priority request already on the stream (and one the
  // channel's thread took before the high one arrived) finishes first.
  CHECK(at <= 2);
}

}  // namespace ISOMETRY_TEST_FILE
