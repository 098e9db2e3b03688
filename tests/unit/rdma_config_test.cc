// [rdma] in the config file: its keys, their ranges, and the errors
// (FILE:LINE, key) for what is not allowed.
#include <catch2/catch.hpp>

#include "config/config_parser.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {
// The smallest node the parser accepts, after the text under test (so
// its line numbers stay the test's).
constexpr std::string_view kNode = "\n[[memory]]\nname = \"a\"\n[[channel]]\nname = \"c\"\n";

Result<Config> Parse(std::string_view toml) {
  return ParseConfig(std::string(toml) + std::string(kNode), "test.toml");
}

std::string ErrorOf(std::string_view toml) {
  auto r = Parse(toml);
  return r.ok() ? "" : std::string(r.status().message());
}
}  // namespace

TEST_CASE("without [rdma] RDMA is used where a device exists (auto)") {
  auto c = Parse("");
  REQUIRE(c.ok());
  CHECK(c->rdma.enable == RdmaEnable::kAuto);
  CHECK(c->rdma.devices.empty());
  CHECK(c->rdma.qps_per_peer == 4);
  CHECK(c->rdma.gid_index == -1);
  CHECK(c->rdma.ring_slots == 32);  // 32 x 1 MiB
  CHECK(c->rdma.slot_bytes() == (1u << 20));
}

TEST_CASE("[rdma] keys parse") {
  auto c = Parse(
      "[rdma]\nenable = \"on\"\ndevices = [\"mlx5_0\", \"rxe0\"]\nqps_per_peer = 8\n"
      "gid_index = 3\nring_slots = 64\nslot_kib = 256\n");
  REQUIRE(c.ok());
  CHECK(c->rdma.ring_slots == 64);
  CHECK(c->rdma.slot_bytes() == 256u << 10);
  CHECK(c->rdma.enable == RdmaEnable::kOn);
  CHECK(c->rdma.devices == std::vector<std::string>{"mlx5_0", "rxe0"});
  CHECK(c->rdma.qps_per_peer == 8);
  CHECK(c->rdma.gid_index == 3);
  CHECK(RdmaEnableName(Parse("[rdma]\nenable = \"off\"\n")->rdma.enable) == "off");
}

TEST_CASE("[rdma] errors name the key and the line") {
  CHECK_THAT(ErrorOf("[rdma]\nenabled = \"on\"\n"),
             Catch::Contains("test.toml:2: key 'rdma.enabled': unknown key (known here: enable, "
                             "devices, qps_per_peer, gid_index, ring_slots, slot_kib)"));
  CHECK_THAT(
      ErrorOf("[rdma]\nenable = true\n"),
      Catch::Contains("test.toml:2: key 'rdma.enable': must be \"auto\", \"on\" or \"off\""));
  CHECK_THAT(ErrorOf("[rdma]\nenable = \"yes\"\n"), Catch::Contains("key 'rdma.enable'"));
  CHECK_THAT(
      ErrorOf("[rdma]\n\nqps_per_peer = 0\n"),
      Catch::Contains("test.toml:3: key 'rdma.qps_per_peer': must be an integer from 1 to 64"));
  CHECK_THAT(ErrorOf("[rdma]\nqps_per_peer = 65\n"), Catch::Contains("rdma.qps_per_peer"));
  CHECK_THAT(ErrorOf("[rdma]\ngid_index = -2\n"), Catch::Contains("rdma.gid_index"));
  CHECK_THAT(ErrorOf("[rdma]\ndevices = \"mlx5_0\"\n"),
             Catch::Contains("key 'rdma.devices': must be a list"));
  CHECK_THAT(ErrorOf("[rdma]\ndevices = [1]\n"), Catch::Contains("key 'rdma.devices'"));
  // Cross-checks (Validate) point at the line too.
  CHECK_THAT(ErrorOf("[rdma]\ndevices = [\"rxe0\", \"rxe0\"]\n"),
             Catch::Contains("test.toml:2: key 'rdma.devices': 'rxe0' is listed twice"));
  CHECK_THAT(ErrorOf("[rdma]\ndevices = [\"../x\"]\n"), Catch::Contains("is not a device name"));
  CHECK_THAT(ErrorOf("rdma = 1\n"), Catch::Contains("key 'rdma': must be a table"));
}

TEST_CASE("[rdma] ring size: slots, slot size and the pinned total are bounded") {
  CHECK_THAT(
      ErrorOf("[rdma]\nring_slots = 0\n"),
      Catch::Contains("test.toml:2: key 'rdma.ring_slots': must be an integer from 1 to 1024"));
  CHECK_THAT(ErrorOf("[rdma]\nring_slots = 1025\n"), Catch::Contains("key 'rdma.ring_slots'"));
  CHECK_THAT(ErrorOf("[rdma]\nring_slots = \"32\"\n"), Catch::Contains("key 'rdma.ring_slots'"));
  CHECK_THAT(ErrorOf("[rdma]\n\nslot_kib = 3\n"),
             Catch::Contains("test.toml:3: key 'rdma.slot_kib': must be an integer from 4 to "
                             "1048576"));
  CHECK_THAT(ErrorOf("[rdma]\nslot_kib = 2097152\n"), Catch::Contains("key 'rdma.slot_kib'"));
  // 1024 slots of 1 GiB: each accepted alone, refused together.
  CHECK_THAT(ErrorOf("[rdma]\nring_slots = 1024\nslot_kib = 1048576\n"),
             Catch::Contains("key 'rdma.slot_kib': is 1048576 with rdma.ring_slots = 1024: a ring "
                             "of 1048576 MiB per peer; at most 16384 MiB are pinned per link"));
  CHECK(Parse("[rdma]\nring_slots = 16\nslot_kib = 1048576\n").ok());  // 16 GiB: the limit
  // Validate alone (a config built in code).
  RdmaConfig r;
  r.slot_kib = 2;
  CHECK_THAT(std::string(r.Validate().message()), Catch::Contains("rdma.slot_kib"));
  r.slot_kib = 4;
  r.ring_slots = 0;
  CHECK_THAT(std::string(r.Validate().message()), Catch::Contains("rdma.ring_slots"));
}

}  // namespace ISOMETRY_TEST_FILE
