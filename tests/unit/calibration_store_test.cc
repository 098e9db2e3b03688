#include "daemon/runtime/calibration_store.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "config/runtime_config.h"

using namespace isometry;

TEST_CASE("calibrations round-trip through the state directory, tagged by fingerprint") {
  const std::string dir = std::filesystem::temp_directory_path() / "iso-calib-test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/calibration.toml";
  RuntimeConfig config = DefaultRuntimeConfig();
  const std::string fp = HardwareFingerprint(config);
  Calibration cal{{"memcpy0", {{4096, 1.5e9}, {1 << 20, 9.25e9}}}};
  REQUIRE(SaveCalibration(path, fp, cal).ok());
  auto back = LoadCalibration(path, fp);
  REQUIRE(back.ok());
  REQUIRE(back->at("memcpy0").size() == 2);
  CHECK(back->at("memcpy0")[1].request_bytes == (1u << 20));
  CHECK(back->at("memcpy0")[1].bytes_per_s == Approx(9.25e9));

  // Another channel setting is another fingerprint: measure again.
  config.channels[0].threads = 7;
  CHECK(HardwareFingerprint(config) != fp);
  CHECK(absl::IsFailedPrecondition(LoadCalibration(path, HardwareFingerprint(config)).status()));
  CHECK(absl::IsNotFound(LoadCalibration(dir + "/absent.toml", fp).status()));
  std::ofstream(path) << "fingerprint = \"" << fp << "\"\n[channel]\nmemcpy0 = [[1, -3.0]]\n";
  CHECK(absl::IsInvalidArgument(LoadCalibration(path, fp).status()));
  // A float byte count (too large for an integer) is a bad sample, not a cast.
  std::ofstream(path) << "fingerprint = \"" << fp << "\"\n[channel]\nmemcpy0 = [[4e96, 1.0]]\n";
  CHECK(absl::IsInvalidArgument(LoadCalibration(path, fp).status()));
  std::filesystem::remove_all(dir);
}
