#include <catch2/catch.hpp>

#include "layout/program_cache.h"

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
  auto p3 = cache.Get({aos.bounds, renamed, aos.layout}, {aos.bounds, renamed, soa.layout}, aos.bounds);
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
