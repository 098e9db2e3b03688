#include "daemon/node/shared_memory.h"

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/huge_mapping.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::MappedRss;
using isometry::testing::MappingField;

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
// every page inside the copy (several times slower than the next copy;
// docs/benchmarks/design-measurements.md, "Pages").
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
    // Zeroed, as a fresh memfd is: neither population nor making the
    // pages huge leaves anything a client could read.
    const std::vector<std::byte> zeros(m->mapped_size());
    CHECK(std::memcmp(m->data(), zeros.data(), zeros.size()) == 0);
    // At a 2 MiB boundary, where huge pages can map.
    CHECK(reinterpret_cast<uintptr_t>(m->data()) % kHugePageBytes == 0);
  }
}

// Whether this kernel has MADV_COLLAPSE: Linux 6.1 or later, built with
// transparent huge pages.
bool KernelCollapses() {
  utsname u{};
  int major = 0, minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return (major > 6 || (major == 6 && minor >= 1)) &&
         std::filesystem::exists("/sys/kernel/mm/transparent_hugepage");
}

// Debian's shmem_enabled = "never" left every client pool in 4 KiB pages,
// and on a host that walks page tables expensively a first copy into a
// fresh allocation then ran at a small fraction of the next one
// (docs/benchmarks/design-measurements.md, "Pages"). Create makes them huge (MADV_COLLAPSE), and a
// second mapping of the fd, as a client makes, maps them as 2 MiB entries.
TEST_CASE("shared memory is made of 2 MiB pages where the kernel can make them") {
  const uint64_t bytes = (uint64_t{8} << 20) + 4096;  // a 4 KiB tail stays small
  auto m = SharedMemory::Create("isometry:test", bytes, /*hugetlb=*/false);
  REQUIRE(m.ok());
  if (!KernelCollapses()) {
    WARN("this kernel has no MADV_COLLAPSE: pools stay in 4 KiB pages here");
    CHECK(m->huge_bytes() == 0);
    return;
  }
  CHECK(m->huge_bytes() == (uint64_t{8} << 20));
  CHECK(MappingField(m->data(), "ShmemPmdMapped") == m->huge_bytes());
  // The client's side: the same memory, aligned, populated, huge too.
  void* q = MapSharedAligned(m->fd(), m->mapped_size(), MAP_POPULATE);
  REQUIRE(q != MAP_FAILED);
  auto* client = static_cast<std::byte*>(q);
  CHECK(reinterpret_cast<uintptr_t>(client) % kHugePageBytes == 0);
  CHECK(MappingField(client, "ShmemPmdMapped") == m->huge_bytes());
  // One memory: what the daemon writes, at either end of a huge page and
  // in the small tail, the client reads.
  for (const uint64_t at : {uint64_t{0}, (uint64_t{2} << 20) - 1, uint64_t{5} << 20, bytes - 1}) {
    m->data()[at] = std::byte{0x5a};
    CHECK(client[at] == std::byte{0x5a});
  }
  ::munmap(client, m->mapped_size());
}

// Small mappings are placed where mmap puts them; large ones leave no
// reservation behind on either side.
TEST_CASE("an aligned shared mapping unmaps what it reserved around it") {
  auto m = SharedMemory::Create("isometry:test", uint64_t{4} << 20, /*hugetlb=*/false);
  REQUIRE(m.ok());
  void* q = MapSharedAligned(m->fd(), m->mapped_size());
  REQUIRE(q != MAP_FAILED);
  auto* p = static_cast<std::byte*>(q);
  // The pages just before and after are not this mapping's: mincore
  // answers ENOMEM for addresses nothing maps.
  unsigned char v = 0;
  CHECK(::mincore(p - kPage, kPage, &v) == -1);
  CHECK(::mincore(p + m->mapped_size(), kPage, &v) == -1);
  ::munmap(p, m->mapped_size());
}

}  // namespace ISOMETRY_TEST_FILE
