// StagingPool's backings (daemon/runtime/staging_pool.h): host pages,
// device memory of a GPU (FBM) and pinned host pages (ZCM), the latter
// two through a bookkeeping GpuMemory so they are tested without a GPU.
#include "daemon/runtime/staging_pool.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

class FakeGpuMemory final : public GpuMemory {
 public:
  Result<uint64_t> AllocateDevice(int device, uint64_t bytes) override {
    if (fail_next) return ResourceExhausted("GPU ", device, ": out of device memory");
    const uint64_t at = next;
    next += bytes + 4096;
    device_live[at] = {device, bytes};
    return at;
  }
  void FreeDevice(int device, uint64_t address) override {
    auto it = device_live.find(address);
    if (it != device_live.end() && it->second.first == device) device_live.erase(it);
  }
  Status PinHost(void* base, uint64_t bytes) override {
    pinned[base] = bytes;
    return OkStatus();
  }
  void UnpinHost(void* base) override { pinned.erase(base); }
  uint64_t next = uint64_t{1} << 40;
  bool fail_next = false;
  std::map<uint64_t, std::pair<int, uint64_t>> device_live;
  std::map<void*, uint64_t> pinned;
};

}  // namespace

TEST_CASE("an FBM pool hands out device memory of its GPU and frees it") {
  FakeGpuMemory gpu;
  {
    StagingPool pool({0, 3}, 8 << 20, "gpu0", {&gpu, 1});
    CHECK(pool.device() == 1);
    Result<std::byte*> a = pool.Take(1 << 20);
    REQUIRE(a.ok());
    REQUIRE(gpu.device_live.size() == 1);
    CHECK(reinterpret_cast<uint64_t>(*a) == gpu.device_live.begin()->first);
    CHECK(gpu.device_live.begin()->second.first == 1);
    pool.Give(*a, 1 << 20);  // kept for reuse, not freed
    CHECK(gpu.device_live.size() == 1);
    Result<std::byte*> b = pool.Take(1 << 20);
    REQUIRE(b.ok());
    CHECK(*b == *a);
    pool.Give(*b, 1 << 20);
    // A device that refuses: the budget's error names the memory.
    gpu.fail_next = true;
    Result<std::byte*> c = pool.Take(4 << 20);
    CHECK(c.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(c.status().message()), Catch::Contains("staging memory 'gpu0'"));
    CHECK(pool.used() == 0);
  }
  CHECK(gpu.device_live.empty());  // the cache is freed with the pool
}

TEST_CASE("a ZCM pool pins its host pages while they are mapped") {
  FakeGpuMemory gpu;
  {
    StagingPool pool({0, 2}, 8 << 20, "zcm0", {&gpu, -1});
    CHECK(pool.device() == -1);
    Result<std::byte*> a = pool.Take(3 << 20);
    REQUIRE(a.ok());
    REQUIRE(gpu.pinned.count(*a) == 1);
    CHECK(gpu.pinned[*a] >= (3u << 20));
    std::memset(*a, 0x5a, 3 << 20);  // host memory the CPU may touch
    pool.Give(*a, 3 << 20);
    CHECK(gpu.pinned.size() == 1);  // cached blocks stay pinned
    // Room for a larger block: the cached one is unpinned and unmapped.
    Result<std::byte*> b = pool.Take(6 << 20);
    REQUIRE(b.ok());
    CHECK(gpu.pinned.size() == 1);
    CHECK(gpu.pinned.count(*b) == 1);
    pool.Give(*b, 6 << 20);
  }
  CHECK(gpu.pinned.empty());
  CHECK(gpu.device_live.empty());
}

TEST_CASE("a host pool without a backing neither pins nor allocates device memory") {
  StagingPool pool({0, 0}, 4 << 20, "sys0");
  CHECK(pool.device() == -1);
  Result<std::byte*> a = pool.Take(1 << 20);
  REQUIRE(a.ok());
  std::memset(*a, 1, 1 << 20);
  pool.Give(*a, 1 << 20);
}

}  // namespace ISOMETRY_TEST_FILE
