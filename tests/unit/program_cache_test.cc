#include "layout/program_cache.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("the program cache memoizes by shape pair and box, LRU first out") {
  ProgramCache cache(2);
  const InstanceShape aos{Box::FromExtents({100}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  auto p1 = cache.Get(aos, soa, aos.bounds);
  REQUIRE(p1.ok());
  auto p2 = cache.Get(aos, soa, aos.bounds);
  REQUIRE(p2.ok());
  CHECK(p1->get() == p2->get());
  CHECK(cache.hits() == 1);
  CHECK(cache.misses() == 1);
  // Field names do not change addressing: same program.
  const FieldSpace renamed = *FieldSpace::Make({{"a", 4}, {"b", 4}, {"c", 4}, {"d", 4}});
  auto p3 =
      cache.Get({aos.bounds, renamed, aos.layout}, {aos.bounds, renamed, soa.layout}, aos.bounds);
  CHECK(cache.hits() == 2);
  // Two more keys evict the first.
  REQUIRE(cache.Get(soa, aos, aos.bounds).ok());
  REQUIRE(cache.Get(aos, aos, aos.bounds).ok());
  CHECK(cache.size() == 2);
  REQUIRE(cache.Get(aos, soa, aos.bounds).ok());
  CHECK(cache.misses() == 4);
  // Errors are returned, never cached.
  Box outside = Box::FromExtents({101});
  CHECK(!cache.Get(aos, soa, outside).ok());
  CHECK(!cache.Get(aos, soa, outside).ok());
  CHECK(cache.size() == 2);
}

TEST_CASE("a thread's repeated copy is found by identity, never for another shape or cache") {
  ProgramCache cache(8);
  const InstanceShape aos{Box::FromExtents({100}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  auto whole = cache.Get(aos, soa, aos.bounds);
  REQUIRE(whole.ok());
  // The same lists: the thread's last program, counted as a hit.
  auto again = cache.Get(InstanceShape(aos), InstanceShape(soa), aos.bounds);
  REQUIRE(again.ok());
  CHECK(again->get() == whole->get());
  CHECK(cache.hits() == 1);
  // The same lists over another box, or other bounds: other programs.
  const Box half = Box::FromExtents({50});
  auto part = cache.Get(aos, soa, half);
  REQUIRE(part.ok());
  CHECK((*part)->bytes == uint64_t{50} * 16);
  CHECK((*whole)->bytes == uint64_t{100} * 16);
  const InstanceShape small_aos{half, aos.fields, aos.layout},
      small_soa{half, aos.fields, soa.layout};
  auto small = cache.Get(small_aos, small_soa, half);
  REQUIRE(small.ok());
  CHECK(small->get() != part->get());  // other strides: another key
  CHECK(cache.misses() == 3);
  // Back to the first: from the cache, the same program.
  auto first = cache.Get(aos, soa, aos.bounds);
  REQUIRE(first.ok());
  CHECK(first->get() == whole->get());
  // Another cache never answers from this thread's last program of this one.
  ProgramCache other(8);
  auto elsewhere = other.Get(aos, soa, aos.bounds);
  REQUIRE(elsewhere.ok());
  CHECK(other.misses() == 1);
  CHECK(other.hits() == 0);
  CHECK(elsewhere->get() != whole->get());
}

TEST_CASE("the program cache keeps at most its byte budget, whatever the entry count") {
  // A 4-D blocked layout and a box that cuts blocks: a program of tens of
  // ops (about 40 KB), and a distinct one for every box.
  const FieldSpace f = FieldSpace::Uniform(2, 4);
  const InstanceShape aos{Box::FromExtents({20, 20, 20, 20}), f, Layout::Aos(4)};
  const InstanceShape blocked{
      aos.bounds, f, *Layout::Parse("x_in=3,y_in=3,z_in=3,w_in=3,F,x_out,y_out,z_out,w_out", 4)};
  auto cut = [&](int64_t lo) {
    Box b = aos.bounds;
    for (int d = 0; d < 4; ++d) {
      b.lo[d] = lo;
      b.hi[d] = 20 - 1;
    }
    return b;
  };
  auto one = ProgramCache(1).Get(aos, blocked, cut(1));
  REQUIRE(one.ok());
  const uint64_t each = ProgramCache::FootprintOf(**one, 0);
  REQUIRE(each > 10000);
  // Room for about three such programs, entries for thousands.
  const uint64_t budget = 3 * each + each / 2;
  ProgramCache cache(4096, budget);
  for (int64_t lo = 1; lo <= 5; ++lo) {
    REQUIRE(cache.Get(aos, blocked, cut(lo)).ok());
    CHECK(cache.bytes() <= budget);
  }
  CHECK(cache.size() >= 2);
  CHECK(cache.size() <= 4);
  CHECK(cache.misses() == 5);
  // The most recent stays; the first was evicted.
  REQUIRE(cache.Get(aos, blocked, cut(5)).ok());
  CHECK(cache.hits() == 1);
  REQUIRE(cache.Get(aos, blocked, cut(1)).ok());
  CHECK(cache.misses() == 6);
  // A program larger than the whole budget is compiled and returned, not kept.
  ProgramCache tiny(4096, 1024);
  auto big = tiny.Get(aos, blocked, cut(1));
  REQUIRE(big.ok());
  CHECK((*big)->bytes == (*one)->bytes);
  CHECK(tiny.size() == 0);
  CHECK(tiny.bytes() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
