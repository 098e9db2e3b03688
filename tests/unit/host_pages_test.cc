#include "channels/host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/runtime/staging_pool.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

bool AlignedTo(const void* p, uint64_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

// The lines of /proc/self/smaps describing the mapping that starts at `p`.
std::string SmapsOf(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::ostringstream out;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == reinterpret_cast<uintptr_t>(p);
    }
    if (inside) out << line << "\n";
  }
  return out.str();
}

bool ThpCompiledIn() { return ::access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0; }

}  // namespace

TEST_CASE("host pages of 2 MiB and more are huge-page aligned, advised and usable") {
  auto pages = HostPages::Map(3ull << 20);
  REQUIRE(pages.ok());
  CHECK(pages->size() == 4ull << 20);  // rounded up to whole huge pages
  CHECK(AlignedTo(pages->data(), kHugePageBytes));
  std::memset(pages->data(), 0x5a, pages->size());
  CHECK(pages->data()[pages->size() - 1] == std::byte{0x5a});
  if (ThpCompiledIn()) {
    // VmFlags "hg": the mapping carries MADV_HUGEPAGE, so faults take huge
    // pages whenever THP is not "never".
    const std::string smaps = SmapsOf(pages->data());
    INFO(smaps);
    CHECK(smaps.find(" hg") != std::string::npos);
  } else {
    WARN("transparent huge pages are compiled out: the advice is not checked");
  }
}

TEST_CASE("small host pages are page-aligned and not rounded to huge pages") {
  auto pages = HostPages::Map(10000);
  REQUIRE(pages.ok());
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  CHECK(pages->size() == (10000 + page - 1) / page * page);
  CHECK(AlignedTo(pages->data(), page));
  CHECK(HostPagesLength(10000) == pages->size());
  CHECK(HostPagesLength(0) == page);
}

TEST_CASE("populated host pages are resident before first use") {
  auto pages = HostPages::Map(4ull << 20, /*populate=*/true);
  REQUIRE(pages.ok());
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(pages->size() / page);
  REQUIRE(::mincore(pages->data(), pages->size(), resident.data()) == 0);
  for (unsigned char r : resident) REQUIRE((r & 1) == 1);
}

TEST_CASE("host pages move, release and unmap exactly once") {
  auto made = HostPages::Map(2ull << 20);
  REQUIRE(made.ok());
  HostPages a = *std::move(made);
  std::byte* const base = a.data();
  HostPages b = std::move(a);
  CHECK(a.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the test
  CHECK(b.data() == base);
  const uint64_t length = b.size();
  std::byte* released = b.release();
  CHECK(b.data() == nullptr);
  CHECK(released == base);
  unsigned char one = 0;
  CHECK(::mincore(released, 4096, &one) == 0);  // still mapped after release
  UnmapHostPages(released, length);
  CHECK(::mincore(released, 4096, &one) == -1);  // gone (ENOMEM: not mapped)
}

TEST_CASE("the staging pool hands out huge-page memory within its budget") {
  StagingPool pool(MemoryId{0, 1}, 8ull << 20);
  auto a = pool.Take(5ull << 20);
  REQUIRE(a.ok());
  CHECK(AlignedTo(*a, kHugePageBytes));
  std::memset(*a, 1, 5ull << 20);
  CHECK(pool.used() == 5ull << 20);
  // The budget counts requested bytes; 4 MiB more would exceed it.
  auto b = pool.Take(4ull << 20);
  CHECK(b.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(pool.used() == 5ull << 20);
  pool.Give(*a, 5ull << 20);
  // Issue #11: the memory is named as the config wrote it, not "0:1".
  StagingPool named(MemoryId{0, 1}, 4096, "sys0");
  CHECK(std::string(named.Take(8192).status().message()) ==
        "staging memory 'sys0': 8192 bytes requested, 4096 of 4096 free");
  CHECK(pool.used() == 0);
  CHECK(pool.peak() == 5ull << 20);
  auto c = pool.Take(8ull << 20);
  REQUIRE(c.ok());
  pool.Give(*c, 8ull << 20);
}

// Issue #21: every transfer's rings were fresh mappings, so their pages
// were faulted in (and zeroed) inside every copy through staging.
TEST_CASE("the staging pool keeps blocks given back resident and hands them out again") {
  StagingPool pool(MemoryId{0, 1}, 16ull << 20);
  auto a = pool.Take(4ull << 20);
  REQUIRE(a.ok());
  std::memset(*a, 0x5a, 4ull << 20);
  pool.Give(*a, 4ull << 20);
  CHECK(pool.used() == 0);
  CHECK(pool.cached() == 4ull << 20);
  auto b = pool.Take(4ull << 20);  // the same length: the same block, pages kept
  REQUIRE(b.ok());
  CHECK(*b == *a);
  CHECK(pool.cached() == 0);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((4ull << 20) / page);
  REQUIRE(::mincore(*b, 4ull << 20, resident.data()) == 0);
  for (unsigned char r : resident) REQUIRE((r & 1) == 1);
  CHECK((*b)[(4ull << 20) - 1] == std::byte{0x5a});  // not discarded (no MADV_DONTNEED)
  pool.Give(*b, 4ull << 20);
}

TEST_CASE("the staging pool's cache and blocks in use stay within the budget") {
  StagingPool pool(MemoryId{0, 1}, 8ull << 20);
  auto a = pool.Take(6ull << 20);
  REQUIRE(a.ok());
  pool.Give(*a, 6ull << 20);
  CHECK(pool.cached() == 6ull << 20);
  // Another length needs room: the cached 6 MiB go.
  auto b = pool.Take(4ull << 20);
  REQUIRE(b.ok());
  CHECK(pool.cached() == 0);
  auto c = pool.Take(2ull << 20);
  REQUIRE(c.ok());
  pool.Give(*b, 4ull << 20);
  CHECK(pool.used() + pool.cached() <= pool.budget());
  // 6 MiB fit beside the 2 MiB in use once the cached 4 MiB are unmapped.
  auto d = pool.Take(6ull << 20);
  REQUIRE(d.ok());
  CHECK(pool.used() + pool.cached() <= pool.budget());
  pool.Give(*c, 2ull << 20);
  pool.Give(*d, 6ull << 20);
  CHECK(pool.used() == 0);
  CHECK(pool.cached() <= pool.budget());
}

TEST_CASE("the THP mode is read from the kernel's setting") {
  const std::string mode = TransparentHugePageMode();
  if (ThpCompiledIn()) {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(in, line);
    CHECK(line.find("[" + mode + "]") != std::string::npos);
  } else {
    CHECK(mode == "unavailable");
  }
}

}  // namespace ISOMETRY_TEST_FILE
