// layout/form_parse: ParseForm reads back exactly what SerializeForm wrote
// (random datatypes' forms), and refuses what a hostile peer could send
// instead: truncation, trailing bytes, bad magic, out-of-range counts,
// nested groups and reaches that would wrap 64-bit sums.
#include <catch2/catch.hpp>
#include <string>

#include "layout/datatype_form.h"
#include "unit/random_datatype.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

void Put(std::string& s, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

// One simple piece: run bytes at offset, one loop.
std::string OnePiece(int64_t offset, int64_t run, int64_t count, int64_t stride) {
  std::string s = "ISOFORM1";
  Put(s, 1);
  Put(s, offset);
  Put(s, run);
  Put(s, 1);
  Put(s, count);
  Put(s, stride);
  Put(s, 0);
  return s;
}

}  // namespace

TEST_CASE("form parse: round trip of random datatypes' forms") {
  RandomDatatypes rng(1234);
  int checked = 0;
  for (int i = 0; i < 300; ++i) {
    const Datatype t = rng.Next(1 + i % 3);
    auto f = DatatypeForm(t, 1 + static_cast<int64_t>(i % 3));
    if (!f.ok() || f->pieces.empty()) continue;
    const std::string bytes = SerializeForm(*f);
    auto back = ParseForm(bytes);
    REQUIRE(back.ok());
    CHECK(*back == *f);
    CHECK(SerializedFormHash(bytes) == FormHash(*f));
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("form parse: hostile input is refused") {
  const std::string good = OnePiece(0, 8, 4, 16);
  REQUIRE(ParseForm(good).ok());
  CHECK(ParseForm(good.substr(0, good.size() - 1)).status().message().find("truncated") !=
        std::string::npos);
  CHECK(!ParseForm(good + "x").ok());
  CHECK(!ParseForm("ISOFORM2" + good.substr(8)).ok());
  CHECK(!ParseForm("ISOFORM1").ok());
  CHECK(!ParseForm(OnePiece(0, 0, 4, 16)).ok());                 // empty run
  CHECK(!ParseForm(OnePiece(0, 8, 1, 16)).ok());                 // unit loop
  CHECK(!ParseForm(OnePiece(0, 8, int64_t{1} << 41, 16)).ok());  // too many iterations
  CHECK(!ParseForm(OnePiece(INT64_MAX - 4, 8, 2, 16)).ok());     // reach wraps
  CHECK(!ParseForm(OnePiece(0, int64_t{1} << 62, 2, 16)).ok());
  std::string many = "ISOFORM1";
  Put(many, int64_t{1} << 40);  // a piece count it cannot hold
  CHECK(!ParseForm(many).ok());
  // A group whose body holds a group.
  std::string nested = "ISOFORM1";
  Put(nested, 1);
  for (int64_t v : {0, 0, 0, 1, 0, 0, 0, 1}) Put(nested, v);
  CHECK(!ParseForm(nested).ok());
  CHECK(!ParseForm(std::string(kMaxSerializedForm + 1, 'x')).ok());
}

}  // namespace ISOMETRY_TEST_FILE
