// The checkpoint delta format (active/checkpoint_delta.h): records written
// and read back, chains applied in order, and every kind of damage refused
// before a byte of the image changes.
#include "active/checkpoint_delta.h"

#include <absl/status/status.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::active;

namespace {

// An image of `pages` pages plus `tail` bytes, each byte from `seed`.
std::vector<std::byte> Image(uint64_t bytes, uint8_t seed) {
  std::vector<std::byte> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = std::byte(static_cast<uint8_t>(i * 7 + seed));
  return v;
}

std::vector<std::byte> Append(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("CRC-32C matches the standard check value") {
  const char* s = "123456789";
  CHECK(Crc32c(0, s, 9) == 0xE3069283u);
  // Continuing from a previous result equals one pass.
  CHECK(Crc32c(Crc32c(0, s, 4), s + 4, 5) == 0xE3069283u);
}

TEST_CASE("a chain of records applied to the base gives the image byte for byte") {
  const uint64_t bytes = 10 * kCheckpointPage + 100;  // a short last page
  const auto base = Image(bytes, 1);
  auto v1 = Image(bytes, 2);
  auto v2 = v1;
  std::memset(v2.data() + 3 * kCheckpointPage, 0xAB, kCheckpointPage);
  std::memset(v2.data() + 10 * kCheckpointPage, 0xCD, 100);
  auto r1 = EncodeDeltaRecord(v1.data(), bytes, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto r2 = EncodeDeltaRecord(v2.data(), bytes, 2, {10, 3, 3});  // unsorted, repeated
  REQUIRE((r1.ok() && r2.ok()));
  CHECK(r2->size() == sizeof(DeltaHeader) + 2 * sizeof(uint64_t) + kCheckpointPage + 100);
  const auto chain = Append(*r1, *r2);
  auto parsed = ParseDeltaChain(chain, bytes);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 2);
  CHECK((*parsed)[1].pages == std::vector<uint64_t>{3, 10});
  auto image = base;
  CHECK(ApplyDeltaChain(chain, *parsed, image.data(), bytes) == 13);
  CHECK(image == v2);
  // An empty record (nothing written since) is valid and changes nothing.
  auto empty = EncodeDeltaRecord(v2.data(), bytes, 3, {});
  REQUIRE(empty.ok());
  CHECK(ParseDeltaChain(Append(chain, *empty), bytes).ok());
  // An empty file is an empty chain.
  CHECK(ParseDeltaChain({}, bytes)->empty());
}

TEST_CASE("pages outside the image are refused when writing") {
  const auto img = Image(2 * kCheckpointPage, 3);
  CHECK(absl::IsInvalidArgument(EncodeDeltaRecord(img.data(), img.size(), 1, {2}).status()));
  CHECK(
      absl::IsInvalidArgument(EncodeDeltaRecord(img.data(), img.size(), 1, {UINT64_MAX}).status()));
}

TEST_CASE("damaged, truncated or foreign chains are refused with DATA_LOSS or INVALID_ARGUMENT") {
  const uint64_t bytes = 4 * kCheckpointPage;
  const auto img = Image(bytes, 4);
  auto r1 = EncodeDeltaRecord(img.data(), bytes, 1, {1, 2});
  auto r2 = EncodeDeltaRecord(img.data(), bytes, 2, {3});
  REQUIRE((r1.ok() && r2.ok()));
  const auto chain = Append(*r1, *r2);
  REQUIRE(ParseDeltaChain(chain, bytes).ok());

  auto flipped_data = chain;
  flipped_data[sizeof(DeltaHeader) + 16 + 5] ^= std::byte{1};
  CHECK(absl::IsDataLoss(ParseDeltaChain(flipped_data, bytes).status()));

  auto flipped_header = chain;
  flipped_header[r1->size() + 20] ^= std::byte{1};  // the second record's image size
  CHECK(absl::IsDataLoss(ParseDeltaChain(flipped_header, bytes).status()));

  for (size_t cut : {size_t{1}, size_t{63}, size_t{64}, r1->size() + 10, chain.size() - 1}) {
    const std::vector<std::byte> truncated(chain.begin(), chain.begin() + cut);
    INFO("cut at " << cut);
    CHECK(absl::IsDataLoss(ParseDeltaChain(truncated, bytes).status()));
  }
  // Records out of order (2 then 1) or for another image size.
  CHECK(absl::IsDataLoss(ParseDeltaChain(Append(*r2, *r1), bytes).status()));
  CHECK(absl::IsInvalidArgument(ParseDeltaChain(chain, bytes + kCheckpointPage).status()));
  // Another version, with a valid header CRC, is refused by name.
  auto v2 = *r1;
  DeltaHeader h;
  std::memcpy(&h, v2.data(), sizeof h);
  h.version = 2;
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(v2.data(), &h, sizeof h);
  const Status s = ParseDeltaChain(v2, bytes).status();
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find("version 2") != std::string::npos);
}

TEST_CASE("a header whose lengths cannot fit the image is refused before its payload is read") {
  const uint64_t bytes = 2 * kCheckpointPage;
  const auto img = Image(bytes, 5);
  auto r = EncodeDeltaRecord(img.data(), bytes, 1, {0});
  REQUIRE(r.ok());
  DeltaHeader h;
  std::memcpy(&h, r->data(), sizeof h);
  h.page_count = 3;  // more pages than the image has
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(r->data(), &h, sizeof h);
  CHECK(absl::IsDataLoss(ParseDeltaHeader(*r).status()));
}

}  // namespace ISOMETRY_TEST_FILE
