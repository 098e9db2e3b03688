#include "daemon/node/shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::MappedRss;

namespace {

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// Pages of [p, p + length) that exist in the memory behind the mapping
// (for a memfd: pages the file holds), by mincore.
uint64_t PagesInCore(const std::byte* p, uint64_t length) {
  std::vector<unsigned char> v(length / kPage);
  if (::mincore(const_cast<std::byte*>(p), length, v.data()) != 0) return 0;
  uint64_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

}  // namespace

// Issue #21: the first copy into a fresh allocation took the page faults of
// every page inside the copy (5-8x slower than the next copy).
TEST_CASE("shared memory is populated when it is made: pages exist and are mapped") {
  // 8 MiB: one thread; 96 MiB: the threaded path (on machines with cores).
  for (const uint64_t bytes : {uint64_t{8} << 20, (uint64_t{96} << 20) + 123}) {
    auto m = SharedMemory::Create("isometry:test", bytes, /*hugetlb=*/false);
    REQUIRE(m.ok());
    INFO("bytes " << bytes << ", populated in " << m->populate_seconds() << " s");
    CHECK(m->mapped_size() % kPage == 0);
    CHECK(PagesInCore(m->data(), m->mapped_size()) == m->mapped_size() / kPage);
    CHECK(MappedRss(m->data()) == m->mapped_size());
    CHECK(m->populate_seconds() > 0);
    // Zeroed, as a fresh memfd is: population wrote nothing visible.
    std::vector<std::byte> zeros(4096);
    CHECK(std::memcmp(m->data() + m->mapped_size() - 4096, zeros.data(), 4096) == 0);
  }
}

}  // namespace ISOMETRY_TEST_FILE
