// The hop window's pure parts (layout/hop_window.h): its geometry, the
// header check a client makes, program records both ways, and the span
// check that keeps a program inside the data area.
#include "layout/hop_window.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "unit/copy_ops.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::Strided;
using namespace isometry::hop_window;

TEST_CASE("a window's areas lie inside it, aligned and apart; a header is checked") {
  const uint64_t bytes = 16 << 20;
  const auto g = GeometryFor(bytes, 1 << 20);
  REQUIRE(g);
  CHECK(g->arena_offset >= sizeof(HopWindowHeader));
  CHECK(g->arena_offset % 4096 == 0);
  CHECK(g->data_offset % 4096 == 0);
  CHECK(g->data_offset >= g->arena_offset + g->arena_bytes);
  CHECK(g->data_offset + g->data_bytes <= bytes);
  CHECK(g->arena_slot_bytes % 4096 == 0);
  CHECK(g->arena_slot_bytes * kHopEntries == g->arena_bytes);
  CHECK_FALSE(GeometryFor(64 << 10, 1 << 20));  // programs leave no data area
  CHECK_FALSE(GeometryFor(bytes, 100));         // not a page per slot

  std::vector<std::byte> w(bytes);
  auto* h = reinterpret_cast<HopWindowHeader*>(w.data());
  InitHeader(*h, *g);
  CHECK(CheckHeader(*h, bytes).ok());
  CHECK_FALSE(CheckHeader(*h, g->data_offset).ok());  // a window smaller than it says
  h->data_offset = g->arena_offset;                   // overlapping the programs
  CHECK_FALSE(CheckHeader(*h, bytes).ok());
  InitHeader(*h, *g);
  h->data_bytes = UINT64_MAX;  // wrapping
  CHECK_FALSE(CheckHeader(*h, bytes).ok());
  InitHeader(*h, *g);
  h->magic = 0;
  CHECK_FALSE(CheckHeader(*h, bytes).ok());
}

TEST_CASE("programs round-trip through records; bad records are refused") {
  CopyProgram p;
  p.ops.push_back(Strided(0, 8, 8, {{3, 24, 8}, {5, 1000, 24}}));
  p.ops.push_back(Strided(4096, 0, 100, {}));
  for (const CopyOp& op : p.ops) {
    p.bytes += op.bytes();
    p.runs += op.runs();
  }
  // Two records: the first with its two loops, the second bare.
  const uint64_t need = 2 * sizeof(ProgramRecord) + 2 * sizeof(CopyLoop);
  std::vector<std::byte> buf(need);
  CHECK_FALSE(EncodeProgram(p, buf.data(), need - 1));
  const std::optional<uint64_t> used = EncodeProgram(p, buf.data(), need);
  REQUIRE(used);
  CHECK(*used == need);
  auto back = DecodeProgram(buf.data(), 2, need);
  REQUIRE(back.ok());
  REQUIRE(back->ops.size() == 2);
  CHECK(back->bytes == p.bytes);
  CHECK(back->runs == p.runs);
  CHECK(back->ops[0].loops[1] == p.ops[0].loops[1]);
  CHECK(back->ops[1].src_offset == 4096);
  CHECK_FALSE(DecodeProgram(buf.data(), 2, need - 1).ok());  // cut short
  CHECK_FALSE(DecodeProgram(buf.data(), 1, need).ok());      // bytes left over

  ProgramRecord r;
  std::memcpy(&r, buf.data(), sizeof r);
  r.num_loops = kMaxCopyLoops + 1;
  std::memcpy(buf.data(), &r, sizeof r);
  CHECK(DecodeProgram(buf.data(), 1, need).status().code() == absl::StatusCode::kInvalidArgument);
  r.num_loops = 2;
  std::memcpy(buf.data(), &r, sizeof r);
  const CopyLoop zero{0, 1, 1};
  std::memcpy(buf.data() + sizeof r, &zero, sizeof zero);
  CHECK(DecodeProgram(buf.data(), 2, need).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a program's span on each side covers every byte it touches, backwards too") {
  CopyProgram p;
  // 4 runs of 8 bytes: source every 24 from 100, destination every -16
  // (two's complement) from 1000.
  p.ops.push_back(Strided(100, 1000, 8, {{4, 24, static_cast<uint64_t>(-16)}}));
  auto src = SideSpan(p, true);
  auto dst = SideSpan(p, false);
  REQUIRE(src);
  REQUIRE(dst);
  CHECK(src->lo == 100);
  CHECK(src->hi == 100 + 3 * 24 + 8);
  CHECK(dst->lo == 1000 - 3 * 16);
  CHECK(dst->hi == 1008);
  // Offsets near 2^64 stay exact (no wrap to a small number).
  CopyProgram far;
  far.ops.push_back(Strided(UINT64_MAX - 4, 0, 8, {}));
  auto s = SideSpan(far, true);
  REQUIRE(s);
  CHECK(s->hi > static_cast<__int128>(UINT64_MAX));
}

}  // namespace ISOMETRY_TEST_FILE
