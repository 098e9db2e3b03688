// Copy programs cut into packed pieces (layout/packed_pieces.h): packing
// every piece into a slot and unpacking it copies exactly what the program
// copies, pieces never exceed their size, and both sides cut alike.
#include "layout/packed_pieces.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "layout/executor.h"
#include "layout/hop_window.h"
#include "unit/copy_ops.h"
#include "unit/random_program.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::RandomProgram;
using isometry::testing::Strided;

namespace {

// Runs `p` through pieces of `piece` bytes: pack each into a slot, check
// the slot holds what the piece claims, unpack it.
std::vector<unsigned char> ThroughPieces(const CopyProgram& p, uint64_t piece,
                                         const std::vector<unsigned char>& src,
                                         uint64_t dst_bytes) {
  const std::vector<CopyProgram> packs = CutPacked(p, piece, PackSide::kPack);
  const std::vector<CopyProgram> unpacks = CutPacked(p, piece, PackSide::kUnpack);
  REQUIRE(packs.size() == unpacks.size());
  std::vector<unsigned char> dst(dst_bytes, 0);
  std::vector<unsigned char> slot(piece + 64, 0xEE);
  uint64_t total = 0;
  bool dense = true;  // the slot side is dense from 0: nothing past the piece's bytes
  for (size_t i = 0; i < packs.size(); ++i) {
    const bool sized =
        packs[i].bytes == unpacks[i].bytes && packs[i].bytes > 0 && packs[i].bytes <= piece;
    if (!sized) FAIL("piece " << i << " of " << packs[i].bytes << " bytes");
    const auto ps = hop_window::SideSpan(packs[i], false);
    const auto us = hop_window::SideSpan(unpacks[i], true);
    const auto whole = static_cast<__int128>(packs[i].bytes);
    dense = dense && ps && us && ps->lo == 0 && ps->hi == whole && us->lo == 0 && us->hi == whole;
    total += packs[i].bytes;
    ExecuteProgram(packs[i], reinterpret_cast<const std::byte*>(src.data()),
                   reinterpret_cast<std::byte*>(slot.data()));
    dense = dense && slot[piece] == 0xEE;
    ExecuteProgram(unpacks[i], reinterpret_cast<const std::byte*>(slot.data()),
                   reinterpret_cast<std::byte*>(dst.data()));
  }
  CHECK(dense);
  CHECK(total == p.bytes);
  return dst;
}

std::vector<unsigned char> Direct(const CopyProgram& p, const std::vector<unsigned char>& src,
                                  uint64_t dst_bytes) {
  std::vector<unsigned char> dst(dst_bytes, 0);
  ExecuteProgram(p, reinterpret_cast<const std::byte*>(src.data()),
                 reinterpret_cast<std::byte*>(dst.data()));
  return dst;
}

std::vector<unsigned char> Pattern(uint64_t n) {
  std::vector<unsigned char> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 131 + (i >> 8) + 1);
  return v;
}

}  // namespace

TEST_CASE("a vector cuts into full pieces of whole runs and copies the same") {
  // 64 runs of 8 bytes, stride 16 on the source, dense on the destination.
  CopyProgram p;
  p.ops.push_back(Strided(0, 0, 8, {{64, 16, 8}}));
  TallyProgram(p);
  const std::vector<CopyProgram> packs = CutPacked(p, 128, PackSide::kPack);
  REQUIRE(packs.size() == 4);
  for (const CopyProgram& piece : packs) {
    CHECK(piece.bytes == 128);
    CHECK(piece.runs == 16);
  }
  // The second piece starts 16 runs in on the source, at 0 in its slot.
  CHECK(packs[1].ops[0].src_offset == uint64_t{16} * 16);
  CHECK(packs[1].ops[0].dst_offset == 0);
  const auto src = Pattern(1024);
  CHECK(ThroughPieces(p, 128, src, 512) == Direct(p, src, 512));
  // A piece that is not a multiple of the run ends early, never mid-run
  // of a looped op.
  const std::vector<CopyProgram> short_pieces = CutPacked(p, 100, PackSide::kUnpack);
  REQUIRE(short_pieces.size() == 6);
  for (size_t i = 0; i + 1 < short_pieces.size(); ++i) CHECK(short_pieces[i].bytes == 96);
  CHECK(short_pieces.back().bytes == 512 - 5 * 96);
  CHECK(ThroughPieces(p, 100, src, 512) == Direct(p, src, 512));
}

TEST_CASE("a run longer than a piece is cut inside the run") {
  const CopyProgram p = *ContiguousProgram(1000);
  const std::vector<CopyProgram> packs = CutPacked(p, 256, PackSide::kPack);
  REQUIRE(packs.size() == 4);
  CHECK(packs[3].bytes == 1000 - 3 * 256);
  CHECK(packs[2].ops[0].src_offset == 512);
  const auto src = Pattern(1000);
  CHECK(ThroughPieces(p, 256, src, 1000) == src);
}

TEST_CASE("an iteration larger than a piece is cut on its own") {
  // 3 iterations of (5 runs of 100 bytes): 500 bytes each, pieces of 128.
  CopyProgram p;
  p.ops.push_back(Strided(0, 7, 100, {{3, 1000, 600}, {5, 150, 110}}));
  TallyProgram(p);
  const auto src = Pattern(4000);
  CHECK(ThroughPieces(p, 128, src, 2000) == Direct(p, src, 2000));
  CHECK(ThroughPieces(p, 500, src, 2000) == Direct(p, src, 2000));
  CHECK(ThroughPieces(p, 1 << 20, src, 2000) == Direct(p, src, 2000));
  CHECK(CutPacked(p, 1 << 20, PackSide::kPack).size() == 1);
}

TEST_CASE("random programs copy the same through pieces of any size") {
  std::mt19937_64 rng(20261129);
  for (int trial = 0; trial < 300; ++trial) {
    uint64_t src_bytes = 0, dst_bytes = 0;
    const CopyProgram p = RandomProgram(rng, &src_bytes, &dst_bytes);
    const auto src = Pattern(src_bytes);
    const std::vector<unsigned char> want = Direct(p, src, dst_bytes);
    for (uint64_t piece : {uint64_t{61}, uint64_t{333}, uint64_t{4096}, p.bytes, p.bytes + 5}) {
      INFO("trial " << trial << " piece " << piece << " bytes " << p.bytes);
      REQUIRE(ThroughPieces(p, piece, src, dst_bytes) == want);
    }
  }
}

TEST_CASE("an empty program has no pieces") {
  CHECK(CutPacked(CopyProgram{}, 64, PackSide::kPack).empty());
}

}  // namespace ISOMETRY_TEST_FILE
