// The two ends of a shared-memory ring (core/shm_ring.h), over one header
// in this process's memory: entries arrive in order across the wrap, a
// full ring has no room, and an index the other side lies about is never
// taken for progress.
#include "core/shm_ring.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using isometry::shm::Distance;
using isometry::shm::RingReader;
using isometry::shm::RingWriter;
using isometry::shm::SharedIndex;

struct Entry {
  uint64_t id;
  uint32_t code;
  uint32_t pad;
};

// One ring as an ABI lays it out: both indexes, then the slots.
struct Ring {
  explicit Ring(uint32_t entries, uint32_t start = 0) : slots(entries) {
    head.value.store(start);
    tail.value.store(start);
  }
  RingWriter<Entry> Writer() { return {slots.data(), uint32_t(slots.size()), &head, &tail}; }
  RingReader<Entry> Reader() { return {slots.data(), uint32_t(slots.size()), &head, &tail}; }
  SharedIndex<uint32_t> head, tail;
  std::vector<Entry> slots;
};

static_assert(sizeof(SharedIndex<uint32_t>) == 64 && alignof(SharedIndex<uint64_t>) == 64,
              "each index alone on its cache line, as the ring ABIs lay them out");

TEST_CASE("entries arrive in order, across the wrap of the free-running indexes") {
  // Started just below 2^32: the indexes wrap while the ring turns.
  Ring ring(4, 0xffffffffu - 5);
  RingWriter<Entry> w = ring.Writer();
  RingReader<Entry> r = ring.Reader();
  uint64_t next = 0, want = 0;
  for (int round = 0; round < 10; ++round) {
    while (w.Room() > 0) w.Push({next++, 7, 0});
    CHECK(w.Room() == 0);
    CHECK(w.Unconsumed());
    CHECK(r.Waiting());
    const auto ready = r.Ready(r.tail());
    REQUIRE(ready == 4u);
    for (uint32_t i = 0; i < *ready; ++i) CHECK(r.Take().id == want++);
    r.Publish();
    CHECK_FALSE(r.Waiting());
    CHECK_FALSE(w.Unconsumed());
    CHECK(w.Room() == 4);
  }
  CHECK(next == 40);
}

TEST_CASE("an end that joins later starts where the ring stands") {
  Ring ring(8);
  RingWriter<Entry> w = ring.Writer();
  w.Push({1, 0, 0});
  w.Push({2, 0, 0});
  RingReader<Entry> r = ring.Reader();  // as a client mapping the ring after its hello
  CHECK(r.Ready(r.tail()) == 2u);
  CHECK(r.Take().id == 1);
  r.Publish();
  RingWriter<Entry> again = ring.Writer();  // a second writer takes up the tail
  CHECK(again.tail() == w.tail());
  CHECK(again.Room() == 7);
}

TEST_CASE("a tail more than a ring ahead is no entry, and can be skipped") {
  Ring ring(4);
  RingReader<Entry> r = ring.Reader();
  ring.tail.value.store(5);  // a producer that lies: 5 entries in a ring of 4
  CHECK_FALSE(r.Ready(r.tail()).has_value());
  ring.tail.value.store(0xfffffff0u);  // or runs backwards
  CHECK_FALSE(r.Ready(r.tail()).has_value());
  r.SkipTo(r.tail());
  r.Publish();
  CHECK(ring.head.value.load() == 0xfffffff0u);
  CHECK(r.Ready(r.tail()) == 0u);
}

TEST_CASE("a consumer's head outside the ring gives the producer no room") {
  Ring ring(4);
  RingWriter<Entry> w = ring.Writer();
  w.Push({1, 0, 0});
  ring.head.value.store(3);  // ahead of anything published
  CHECK(w.Room() == 0);
  ring.head.value.store(0xffffff00u);  // far behind
  CHECK(w.Room() == 0);
  ring.head.value.store(1);  // the truth: one taken
  CHECK(w.Room() == 4);
  // The producer moves on from its own tail, whatever is written to the
  // shared one.
  ring.tail.value.store(1000);
  w.Push({2, 0, 0});
  CHECK(ring.tail.value.load() == 2);
  CHECK(ring.slots[1].id == 2);
}

TEST_CASE("Distance is bounded by the capacity") {
  CHECK(Distance<uint32_t>(10, 10, 4) == 0u);
  CHECK(Distance<uint32_t>(10, 14, 4) == 4u);
  CHECK_FALSE(Distance<uint32_t>(10, 15, 4).has_value());
  CHECK_FALSE(Distance<uint32_t>(10, 9, 4).has_value());
  CHECK(Distance<uint32_t>(0xfffffffeu, 1, 4) == 3u);  // across the wrap
  CHECK(Distance<uint64_t>(100, 4196, 4096) == 4096u);
}

}  // namespace ISOMETRY_TEST_FILE
