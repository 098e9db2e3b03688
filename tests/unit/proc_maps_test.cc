// ProtectionOf (procmem/proc_maps.h): which ranges of a process's maps
// the daemon may write, read, or not take at all.
#include "procmem/proc_maps.h"

#include <catch2/catch.hpp>
#include <string>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// Three pages of 0x1000 from 0x10000, as the kernel writes them: rw, r--
// (a file's read-only data), then a hole, then r-x code and ---p.
constexpr char kMaps[] =
    "00010000-00011000 rw-p 00000000 00:00 0 \n"
    "00011000-00012000 r--p 00002000 08:01 1234                       /usr/lib/x.so\n"
    "00013000-00014000 r-xp 00000000 08:01 99                         /usr/bin/python3\n"
    "00014000-00015000 ---p 00000000 00:00 0 \n"
    "00015000-00017000 rw-s 00000000 00:05 7                          /memfd:x (deleted)\n";

}  // namespace

TEST_CASE("a range all mapped rw is writable") {
  auto p = ProtectionOf(kMaps, 0x10000, 0x1000);
  REQUIRE(p.ok());
  CHECK(p->writable);
  auto shared = ProtectionOf(kMaps, 0x15800, 0x1000);
  REQUIRE(shared.ok());
  CHECK(shared->writable);
}

TEST_CASE("a range that takes in read-only or code pages may only be read, saying which") {
  auto p = ProtectionOf(kMaps, 0x10800, 0x1000);
  REQUIRE(p.ok());
  CHECK_FALSE(p->writable);
  CHECK_THAT(p->first_read_only, Catch::Contains("r--p") && Catch::Contains("/usr/lib/x.so"));
  auto code = ProtectionOf(kMaps, 0x13000, 0x10);
  REQUIRE(code.ok());
  CHECK_FALSE(code->writable);
  CHECK_THAT(code->first_read_only, Catch::Contains("python3"));
}

TEST_CASE("holes and no-access pages are refused, naming where") {
  auto hole = ProtectionOf(kMaps, 0x11800, 0x1000);
  REQUIRE(absl::IsInvalidArgument(hole.status()));
  CHECK_THAT(std::string(hole.status().message()), Catch::Contains("nothing at 0x12000"));
  auto none = ProtectionOf(kMaps, 0x13800, 0x1000);
  REQUIRE(absl::IsInvalidArgument(none.status()));
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("no-access"));
  auto past = ProtectionOf(kMaps, 0x16000, 0x2000);
  REQUIRE(absl::IsInvalidArgument(past.status()));
  CHECK_THAT(std::string(past.status().message()), Catch::Contains("nothing at 0x17000"));
  auto before = ProtectionOf(kMaps, 0x8000, 0x10);
  CHECK(absl::IsInvalidArgument(before.status()));
}

TEST_CASE("a malformed line over the range is refused, one elsewhere is not read") {
  const std::string bad = std::string(kMaps) + "zz-yy rw-p\n";
  CHECK(ProtectionOf(bad, 0x10000, 0x100).ok());  // found before the bad line
  CHECK(
      absl::IsInvalidArgument(ProtectionOf("00010000-0000f000 rw-p 0 0 0\n", 0x10000, 1).status()));
  CHECK(absl::IsInvalidArgument(ProtectionOf("", 0x10000, 1).status()));
}

}  // namespace ISOMETRY_TEST_FILE
