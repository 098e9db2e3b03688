#include "daemon/runtime/calibration_store.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "config/runtime_config.h"

namespace ISOMETRY_TEST_FILE {

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

// A starved measurement (a pipeline that moved nothing read 0 B/s) once
// made the saved file unloadable, so every later start measured again.
TEST_CASE("samples the loader would refuse are not saved: the file still loads") {
  const std::string dir = std::filesystem::temp_directory_path() / "iso-calib-zero-test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/calibration.toml";
  const std::string fp = HardwareFingerprint(DefaultRuntimeConfig());
  Calibration cal{{"memcpy0", {{4096, 0.0}, {1 << 20, 9.25e9}, {8192, -1.0}}},
                  {":node_pipe", {{65536, 0.0}}}};
  REQUIRE(SaveCalibration(path, fp, cal).ok());
  auto back = LoadCalibration(path, fp);
  REQUIRE(back.ok());
  REQUIRE(back->at("memcpy0").size() == 1);
  CHECK(back->at("memcpy0")[0].request_bytes == (1u << 20));
  CHECK(!back->contains(":node_pipe"));  // left unmeasured, as before it was measured
  std::filesystem::remove_all(dir);
}

TEST_CASE("a channel's plain-copy and 8-field curves round-trip; a file without them loads") {
  const std::string dir = std::filesystem::temp_directory_path() / "iso-calib-curves-test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/calibration.toml";
  const std::string fp = HardwareFingerprint(DefaultRuntimeConfig());
  CHECK(ContiguousCurve("memcpy0") == "memcpy0:contiguous");
  CHECK(Fields8Curve("memcpy0") == "memcpy0:fields8");
  Calibration cal{{"memcpy0", {{1, 2e9}, {64ull << 20, 9e9}}},
                  {ContiguousCurve("memcpy0"), {{4096, 1e9}, {64ull << 20, 20.5e9}}},
                  {Fields8Curve("memcpy0"), {{1, 1e9}, {64, 5e9}}}};
  REQUIRE(SaveCalibration(path, fp, cal).ok());
  auto back = LoadCalibration(path, fp);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 3);
  CHECK(back->at(ContiguousCurve("memcpy0"))[1].request_bytes == (64ull << 20));
  CHECK(back->at(ContiguousCurve("memcpy0"))[1].bytes_per_s == Approx(20.5e9));
  CHECK(back->at(Fields8Curve("memcpy0"))[1].bytes_per_s == Approx(5e9));
  // A file as earlier daemons wrote it: one curve per channel.
  std::ofstream(path) << "fingerprint = \"" << fp
                      << "\"\n[channel]\nmemcpy0 = [[1, 2.0e9], [67108864, 9.0e9]]\n";
  auto old = LoadCalibration(path, fp);
  REQUIRE(old.ok());
  CHECK(old->size() == 1);
  CHECK(old->count(ContiguousCurve("memcpy0")) == 0);
  std::filesystem::remove_all(dir);
}

}  // namespace ISOMETRY_TEST_FILE
