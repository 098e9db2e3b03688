// The checkpoint delta format (active/checkpoint_delta.h): records written
// and read back by the streaming walk, chains applied in order, and every
// kind of damage, forgery and oversized chain refused before a byte of the
// image changes.
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

// A keyed stand-in for the daemon's HMAC (CRC-32C chains seeded by the
// key): enough to tell one key from another here.
class FakeMac final : public DeltaMac {
 public:
  explicit FakeMac(uint32_t key) : key_(key) {}
  void Start() override { crc_ = Crc32c(0, &key_, sizeof key_); }
  void Update(const void* data, size_t n) override { crc_ = Crc32c(crc_, data, n); }
  DeltaMacValue Finish() override {
    DeltaMacValue v{};
    for (size_t i = 0; i < v.size(); i += 4) {
      const uint32_t word = Crc32c(crc_, &i, sizeof i);
      std::memcpy(v.data() + i, &word, 4);
    }
    return v;
  }

 private:
  uint32_t key_, crc_ = 0;
};

// Records 1..n of a chain, each over `pages[k]` of `images[k]`.
std::vector<std::byte> Chain(const std::vector<std::vector<std::byte>>& images,
                             const std::vector<std::vector<uint64_t>>& pages, DeltaMac& mac) {
  std::vector<std::byte> chain;
  DeltaMacValue last{};
  for (size_t k = 0; k < images.size(); ++k) {
    auto r = EncodeDeltaRecord(images[k].data(), images[k].size(), k + 1, pages[k], last, mac);
    REQUIRE(r.ok());
    last = RecordMac(*r);
    chain = Append(chain, *r);
  }
  return chain;
}

DeltaReader ReaderOf(const std::vector<std::byte>& chain) {
  return [&chain](uint64_t off, std::byte* out, uint64_t n) -> Status {
    if (off > chain.size() || n > chain.size() - off) return absl::DataLossError("past the end");
    std::memcpy(out, chain.data() + off, n);
    return OkStatus();
  };
}

// Walks `chain` into `image` (a copy is changed only on success).
Result<DeltaWalk> Apply(const std::vector<std::byte>& chain, std::vector<std::byte>& image,
                        DeltaMac& mac, uint64_t max_records = 100, uint64_t chunk = 1 << 20) {
  auto copy = image;
  auto w = WalkDeltaChain(
      chain.size(), ReaderOf(chain), image.size(), max_records, mac,
      [&](uint64_t page, const std::byte* data, uint64_t n) {
        std::memcpy(copy.data() + page * kCheckpointPage, data, n);
        return OkStatus();
      },
      chunk);
  if (w.ok()) image = copy;
  return w;
}

}  // namespace

TEST_CASE("CRC-32C matches the standard check value") {
  const char* s = "123456789";
  CHECK(Crc32c(0, s, 9) == 0xE3069283u);
  // Continuing from a previous result equals one pass.
  CHECK(Crc32c(Crc32c(0, s, 4), s + 4, 5) == 0xE3069283u);
}

TEST_CASE("a chain of records applied to the base gives the image byte for byte") {
  FakeMac mac(7);
  const uint64_t bytes = 10 * kCheckpointPage + 100;  // a short last page
  const auto base = Image(bytes, 1);
  auto v1 = Image(bytes, 2);
  auto v2 = v1;
  std::memset(v2.data() + 3 * kCheckpointPage, 0xAB, kCheckpointPage);
  std::memset(v2.data() + 10 * kCheckpointPage, 0xCD, 100);
  const auto chain =
      Chain({v1, v2}, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {10, 3, 3}}, mac);  // unsorted, repeated
  CHECK(chain.size() == 2 * kDeltaRecordHead + 11 * uint64_t{8} + 10 * kCheckpointPage + 100 +
                            2 * uint64_t{8} + kCheckpointPage + 100);
  // Whatever the chunk size (one page, a few, all), the same image.
  for (uint64_t chunk : {kCheckpointPage, 3 * kCheckpointPage, uint64_t{1} << 20}) {
    auto image = base;
    auto w = Apply(chain, image, mac, 100, chunk);
    REQUIRE(w.ok());
    CHECK(w->records == 2);
    CHECK(w->pages == 13);
    CHECK(image == v2);
  }
  // An empty record (nothing written since) is valid and changes nothing;
  // an empty file is an empty chain.
  const auto three = Chain({v1, v2, v2}, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {3, 10}, {}}, mac);
  auto image = base;
  CHECK(Apply(three, image, mac)->records == 3);
  CHECK(image == v2);
  CHECK(Apply({}, image, mac)->records == 0);
}

TEST_CASE("pages outside the image are refused when writing") {
  FakeMac mac(1);
  const auto img = Image(2 * kCheckpointPage, 3);
  CHECK(absl::IsInvalidArgument(
      EncodeDeltaRecord(img.data(), img.size(), 1, {2}, DeltaMacValue{}, mac).status()));
  CHECK(absl::IsInvalidArgument(
      EncodeDeltaRecord(img.data(), img.size(), 1, {UINT64_MAX}, DeltaMacValue{}, mac).status()));
}

TEST_CASE("damaged, truncated or foreign chains are refused and change nothing") {
  FakeMac mac(9);
  const uint64_t bytes = 4 * kCheckpointPage;
  const auto img = Image(bytes, 4);
  const auto chain = Chain({img, img}, {{1, 2}, {3}}, mac);
  const uint64_t first = kDeltaRecordHead + 2 * uint64_t{8} + 2 * kCheckpointPage;
  const auto base = Image(bytes, 77);
  auto image = base;
  REQUIRE(Apply(chain, image, mac).ok());
  auto refused = [&](const std::vector<std::byte>& c, uint64_t max_records = 100) {
    auto target = base;
    Status s = Apply(c, target, mac, max_records).status();
    CHECK(target == base);
    return s;
  };

  auto flipped_data = chain;
  flipped_data[kDeltaRecordHead + 16 + 5] ^= std::byte{1};
  CHECK(absl::IsDataLoss(refused(flipped_data)));

  auto flipped_header = chain;
  flipped_header[first + 20] ^= std::byte{1};  // the second record's image size
  CHECK(absl::IsDataLoss(refused(flipped_header)));

  for (uint64_t cut :
       {uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{95}, first + 10, chain.size() - 1}) {
    const std::vector<std::byte> truncated(chain.begin(), chain.begin() + cut);
    INFO("cut at " << cut);
    CHECK(absl::IsDataLoss(refused(truncated)));
  }
  // Records out of order (2 then 1).
  const std::vector<std::byte> r1(chain.begin(), chain.begin() + first);
  const std::vector<std::byte> r2(chain.begin() + first, chain.end());
  CHECK(absl::IsDataLoss(refused(Append(r2, r1))));
  // A chain for another image size.
  auto other = Image(bytes + kCheckpointPage, 1);
  CHECK(!Apply(chain, other, mac).ok());
  // More records than the bound allows.
  const Status many = refused(chain, 1);
  CHECK(absl::IsDataLoss(many));
  CHECK(std::string(many.message()).find("checkpoint_max_deltas") != std::string::npos);
}

TEST_CASE("a record made with another key, or moved, fails its MAC") {
  FakeMac mac(1), other(2);
  const uint64_t bytes = 4 * kCheckpointPage;
  const auto img = Image(bytes, 4);
  auto evil = img;
  std::memset(evil.data() + kCheckpointPage, 'E', kCheckpointPage);
  const auto chain = Chain({img}, {{1}}, mac);
  // A record with correct CRCs but another key, appended to the chain.
  auto forged = EncodeDeltaRecord(evil.data(), bytes, 2, {1}, RecordMac(chain), other);
  REQUIRE(forged.ok());
  const auto base = Image(bytes, 9);
  auto target = base;
  const Status s = Apply(Append(chain, *forged), target, mac).status();
  INFO(s.ToString());
  CHECK(absl::IsDataLoss(s));
  CHECK(std::string(s.message()).find("record 2") != std::string::npos);
  CHECK(std::string(s.message()).find("MAC") != std::string::npos);
  CHECK(target == base);
  // The right key but the wrong predecessor (a record dropped before it).
  const auto two = Chain({img, img, evil}, {{1}, {2}, {1}}, mac);
  const uint64_t rec = kDeltaRecordHead + 8 + kCheckpointPage;
  std::vector<std::byte> dropped(two.begin(), two.begin() + rec);
  dropped.insert(dropped.end(), two.begin() + 2 * rec, two.end());
  // Fix the sequence so only the MAC chain can tell.
  DeltaHeader h;
  std::memcpy(&h, dropped.data() + rec, sizeof h);
  h.sequence = 2;
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(dropped.data() + rec, &h, sizeof h);
  CHECK(absl::IsDataLoss(Apply(dropped, target, mac).status()));
  CHECK(target == base);
}

TEST_CASE("version 1 is refused with a message to take a full checkpoint") {
  FakeMac mac(3);
  const uint64_t bytes = 2 * kCheckpointPage;
  const auto img = Image(bytes, 4);
  auto chain = Chain({img}, {{0}}, mac);
  DeltaHeader h;
  std::memcpy(&h, chain.data(), sizeof h);
  h.version = 1;
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(chain.data(), &h, sizeof h);
  auto target = img;
  const Status s = Apply(chain, target, mac).status();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(std::string(s.message()).find("full checkpoint") != std::string::npos);
  h.version = 3;
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(chain.data(), &h, sizeof h);
  CHECK(absl::IsInvalidArgument(Apply(chain, target, mac).status()));
}

TEST_CASE("a chain larger than any checkpoint leaves is refused unread") {
  FakeMac mac(4);
  const uint64_t bytes = 2 * kCheckpointPage;
  uint64_t reads = 0;
  auto read = [&](uint64_t, std::byte*, uint64_t) {
    ++reads;
    return OkStatus();
  };
  const uint64_t huge = uint64_t{60} << 30;  // a sparse 60 GiB file
  const Status s = WalkDeltaChain(huge, read, bytes, 17, mac, {}).status();
  INFO(s.ToString());
  CHECK(absl::IsDataLoss(s));
  CHECK(std::string(s.message()).find(std::to_string(MaxDeltaChainBytes(bytes))) !=
        std::string::npos);
  CHECK(reads == 0);
  CHECK(CheckDeltaChainSize(MaxDeltaChainBytes(bytes), bytes).ok());
  CHECK(absl::IsDataLoss(CheckDeltaChainSize(MaxDeltaChainBytes(bytes) + 1, bytes)));
  // The bound holds the largest chain a checkpoint leaves: one no larger
  // than the image, plus a record of every page.
  const auto img = Image(bytes, 1);
  auto all = EncodeDeltaRecord(img.data(), bytes, 1, {0, 1}, DeltaMacValue{}, mac);
  REQUIRE(all.ok());
  CHECK(all->size() == MaxDeltaRecordBytes(bytes) - 8);  // the bound counts a page more
  CHECK(MaxDeltaChainBytes(bytes) == bytes + MaxDeltaRecordBytes(bytes));
}

TEST_CASE("a header whose lengths cannot fit the image is refused before its payload is read") {
  FakeMac mac(5);
  const uint64_t bytes = 2 * kCheckpointPage;
  const auto img = Image(bytes, 5);
  auto r = EncodeDeltaRecord(img.data(), bytes, 1, {0}, DeltaMacValue{}, mac);
  REQUIRE(r.ok());
  DeltaHeader h;
  std::memcpy(&h, r->data(), sizeof h);
  h.page_count = 3;  // more pages than the image has
  h.header_crc = Crc32c(0, &h, offsetof(DeltaHeader, header_crc));
  std::memcpy(r->data(), &h, sizeof h);
  CHECK(absl::IsDataLoss(ParseDeltaHeader(*r).status()));
}

}  // namespace ISOMETRY_TEST_FILE
