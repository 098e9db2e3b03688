// The RDMA registration cache's logic over a fake registrar that records
// every registration and deregistration (no device needed): hits inside a
// range, merging of overlapping ranges, LRU eviction that spares ranges in
// use, invalidation when memory is freed, and errors passed on.
#include <catch2/catch.hpp>
#include <map>
#include <utility>

#include "net/rdma/reg_cache.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

namespace {

constexpr uint64_t kPage = 4096;

// What the fake NIC holds: live registrations by key, and a log.
struct FakeNic {
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> live;  // key -> (addr, length)
  uint32_t next_key = 1;
  int regs = 0, deregs = 0;
  bool fail = false;

  Registrar registrar() {
    return {[this](uint64_t addr, uint64_t length) -> Result<Registration> {
              if (fail) return absl::ResourceExhaustedError("ibv_reg_mr: Cannot allocate memory");
              ++regs;
              const uint32_t key = next_key++;
              live[key] = {addr, length};
              return Registration{addr, length, key, key + 1000, nullptr};
            },
            [this](const Registration& r) {
              ++deregs;
              REQUIRE(live.erase(r.lkey) == 1);  // deregistered once, and only what was made
            }};
  }
};

RegCache::Limits Limits(uint64_t max_bytes = 1ull << 30, size_t max_entries = 100) {
  RegCache::Limits l;
  l.max_bytes = max_bytes;
  l.max_entries = max_entries;
  l.page_bytes = kPage;
  return l;
}

}  // namespace

TEST_CASE("a range inside a registration is a hit; ranges are widened to pages") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits());
  auto a = cache.Acquire(10 * kPage + 100, 200);
  REQUIRE(a.ok());
  CHECK(a->registration().addr == 10 * kPage);
  CHECK(a->registration().length == kPage);
  auto b = cache.Acquire(10 * kPage + 4000, 96);  // the same page
  REQUIRE(b.ok());
  CHECK(b->lkey() == a->lkey());
  CHECK(b->rkey() == a->lkey() + 1000);
  CHECK(nic.regs == 1);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 1);
  // One byte past the page is not covered.
  auto c = cache.Acquire(10 * kPage + 4000, 97);
  REQUIRE(c.ok());
  CHECK(c->lkey() != a->lkey());
}

TEST_CASE("overlapping requests are merged into one registration over the union") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits());
  {
    auto a = cache.Acquire(0x100000, 2 * kPage);  // pages 0x100, 0x101
    auto b = cache.Acquire(0x104000, kPage);      // page 0x104
    REQUIRE((a.ok() && b.ok()));
  }
  CHECK(cache.stats().entries == 2);
  // Pages 0x101..0x104 touch both: one registration 0x100..0x104 replaces them.
  auto m = cache.Acquire(0x101000, 4 * kPage);
  REQUIRE(m.ok());
  CHECK(m->registration().addr == 0x100000);
  CHECK(m->registration().length == 5 * kPage);
  CHECK(cache.stats().entries == 1);
  CHECK(cache.stats().bytes == 5 * kPage);
  CHECK(nic.deregs == 2);  // the two it replaced, unused, went at once
  CHECK(nic.live.size() == 1);
  // Both old ranges are now hits in the merged one.
  CHECK(cache.Acquire(0x100000, 10)->lkey() == m->lkey());
  CHECK(cache.Acquire(0x104fff, 1)->lkey() == m->lkey());
}

TEST_CASE("a replaced registration still in use lives until its user lets go") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits());
  RegRef old = *cache.Acquire(0x200000, kPage);
  auto merged = cache.Acquire(0x200000, 3 * kPage);
  REQUIRE(merged.ok());
  CHECK(merged->lkey() != old.lkey());
  CHECK(nic.live.size() == 2);  // both pinned: the old one is in use
  CHECK(nic.live.count(old.lkey()) == 1);
  old = RegRef();
  CHECK(nic.live.size() == 1);
  CHECK(nic.deregs == 1);
}

TEST_CASE("least recently used registrations are evicted, never one in use") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits(3 * kPage));
  const uint64_t p1 = 0x10 * kPage, p2 = 0x20 * kPage, p3 = 0x30 * kPage, p4 = 0x40 * kPage;
  RegRef held = *cache.Acquire(p1, 1);  // oldest, but in use
  (void)cache.Acquire(p2, 1);
  (void)cache.Acquire(p3, 1);
  (void)cache.Acquire(p2, 1);  // p2 used again: p3 is now the least recent unused
  REQUIRE(cache.Acquire(p4, 1).ok());
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().entries == 3);
  CHECK(cache.Acquire(p1, 1)->lkey() == held.lkey());  // still cached
  const int regs = nic.regs;
  CHECK(cache.Acquire(p2, 1).ok());
  CHECK(nic.regs == regs);  // p2 was kept
  CHECK(cache.Acquire(p3, 1).ok());
  CHECK(nic.regs == regs + 1);  // p3 had gone
}

TEST_CASE("a request that cannot fit beside registrations in use fails and registers nothing") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits(2 * kPage));
  RegRef a = *cache.Acquire(0, kPage);
  RegRef b = *cache.Acquire(4 * kPage, kPage);
  auto c = cache.Acquire(8 * kPage, kPage);
  REQUIRE_FALSE(c.ok());
  CHECK(absl::IsResourceExhausted(c.status()));
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("registration cache full"));
  CHECK(nic.regs == 2);
  a = RegRef();  // released: its room can be taken
  CHECK(cache.Acquire(8 * kPage, kPage).ok());
  CHECK(cache.stats().evictions == 1);
}

TEST_CASE("the entry limit evicts like the byte limit") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits(1ull << 30, 2));
  for (uint64_t i = 0; i < 5; ++i) REQUIRE(cache.Acquire(i * 16 * kPage, 1).ok());
  CHECK(cache.stats().entries == 2);
  CHECK(cache.stats().evictions == 3);
  CHECK(nic.live.size() == 2);
}

TEST_CASE("freeing memory invalidates every registration over it") {
  FakeNic nic;
  RegCache cache(nic.registrar(), Limits());
  (void)cache.Acquire(0x10 * kPage, 2 * kPage);
  RegRef in_use = *cache.Acquire(0x20 * kPage, kPage);
  (void)cache.Acquire(0x30 * kPage, kPage);
  // A pool spanning pages 0x11..0x2f is freed: the first two overlap it.
  cache.Invalidate(0x11 * kPage + 5, 0x1e * kPage);
  CHECK(cache.stats().invalidations == 2);
  CHECK(cache.stats().entries == 1);
  CHECK(nic.live.size() == 2);  // the unused one went; the one in use stays pinned
  CHECK(nic.live.count(in_use.lkey()) == 1);
  const uint32_t stale = in_use.lkey();
  in_use = RegRef();
  CHECK(nic.live.count(stale) == 0);
  // The range is registered afresh when used again (new memory, new key).
  auto again = cache.Acquire(0x20 * kPage, kPage);
  REQUIRE(again.ok());
  CHECK(again->lkey() != stale);
  // The untouched range is still a hit.
  const uint64_t hits = cache.stats().hits;
  (void)cache.Acquire(0x30 * kPage, 1);
  CHECK(cache.stats().hits == hits + 1);
}

TEST_CASE("registration errors and impossible ranges are passed on, nothing cached") {
  FakeNic nic;
  RegCache::Limits l = Limits();
  l.max_region = 4 * kPage;
  RegCache cache(nic.registrar(), l);
  CHECK_FALSE(cache.Acquire(0, 0).ok());
  CHECK_FALSE(cache.Acquire(~0ull - 10, 100).ok());
  auto big = cache.Acquire(0, 5 * kPage);
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(std::string(big.status().message()), Catch::Contains("largest memory region"));
  nic.fail = true;
  auto failed = cache.Acquire(0, kPage);
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(std::string(failed.status().message()), Catch::Contains("ibv_reg_mr"));
  CHECK(cache.stats().entries == 0);
  nic.fail = false;
  // A merge that would pass max_region registers the request alone.
  (void)cache.Acquire(0, 3 * kPage);
  auto alone = cache.Acquire(2 * kPage, 3 * kPage);
  REQUIRE(alone.ok());
  CHECK(alone->registration().addr == 2 * kPage);
  CHECK(alone->registration().length == 3 * kPage);
  CHECK(cache.stats().entries == 1);
}

TEST_CASE("destroying the cache deregisters what is unused and spares what is held") {
  FakeNic nic;
  RegRef held;
  {
    RegCache cache(nic.registrar(), Limits());
    held = *cache.Acquire(0, kPage);
    (void)cache.Acquire(16 * kPage, kPage);
  }
  CHECK(nic.live.size() == 1);
  CHECK(held.lkey() == nic.live.begin()->first);
  held = RegRef();
  CHECK(nic.live.empty());
}

}  // namespace ISOMETRY_TEST_FILE
