// The serve window's pure parts (layout/serve_window.h): the header a
// reader checks before it trusts a mapping, the areas' places, and the
// tagged progress counts that make resets between requests unneeded.
#include "layout/serve_window.h"

#include <catch2/catch.hpp>
#include <memory>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::serve_window;

TEST_CASE("a reader refuses a window of another size, token or layout") {
  auto h = std::make_unique<Header>();
  InitHeader(*h, 0x1234);
  CHECK(CheckHeader(*h, kWindowBytes, 0x1234).ok());
  CHECK_FALSE(CheckHeader(*h, kWindowBytes, 0x1235).ok());         // another window
  CHECK_FALSE(CheckHeader(*h, kWindowBytes - 4096, 0x1234).ok());  // a shorter file
  h->header_bytes += 64;                                           // another build's lanes
  CHECK_FALSE(CheckHeader(*h, kWindowBytes, 0x1234).ok());
  InitHeader(*h, 0x1234);
  h->slot_bytes *= 2;
  CHECK_FALSE(CheckHeader(*h, kWindowBytes, 0x1234).ok());
  InitHeader(*h, 0x1234);
  h->magic = 0;
  CHECK_FALSE(CheckHeader(*h, kWindowBytes, 0x1234).ok());
}

TEST_CASE("lanes' areas lie inside the window, apart") {
  std::byte* base = nullptr;
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    const uint64_t program = static_cast<uint64_t>(ProgramArea(base, lane) - base);
    CHECK(program >= kAreasOffset);
    CHECK(program % 4096 == 0);
    const uint64_t last = static_cast<uint64_t>(Slot(base, lane, kSlots - 1) - base);
    CHECK(static_cast<uint64_t>(Slot(base, lane, 0) - base) == program + kProgramBytes);
    CHECK(last + kSlotBytes == program + kAreaBytes);
    CHECK(last + kSlotBytes <= kWindowBytes);
  }
}

TEST_CASE("a count is another request's zero") {
  CHECK(CountFor(Tagged(7, 3), 7) == 3);
  CHECK(CountFor(Tagged(7, 3), 8) == 0);
  CHECK(CountFor(Tagged(7 + 0x10000, kMaxPieces), 7) == kMaxPieces);  // tags wrap at 16 bits
  CHECK(CountFor(0, 1) == 0);                                         // a fresh lane
}

}  // namespace ISOMETRY_TEST_FILE
