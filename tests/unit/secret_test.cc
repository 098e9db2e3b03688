#include "daemon/cluster/secret.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {
std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/iso-secret-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}
}  // namespace

TEST_CASE("the cluster secret is read without its newline and must be long enough") {
  const std::string good = WriteTemp("0123456789abcdef-secret\n");
  auto s = LoadSecret(good);
  REQUIRE(s.ok());
  CHECK(*s == "0123456789abcdef-secret");
  const std::string short_one = WriteTemp("short\n");
  auto bad = LoadSecret(short_one);
  REQUIRE(!bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("at least 16"));
  CHECK(absl::IsNotFound(LoadSecret("/nonexistent/secret").status()));
  unlink(good.c_str());
  unlink(short_one.c_str());
}

TEST_CASE("HMACs bind every part, its order and the secret") {
  const std::string k = "0123456789abcdef";
  const std::string m = Hmac(k, {"hello", "node-a", "1"});
  CHECK(m.size() == 32);  // SHA-256
  CHECK(SameSecret(m, Hmac(k, {"hello", "node-a", "1"})));
  CHECK(!SameSecret(m, Hmac(k, {"hello", "node-a", "2"})));
  CHECK(!SameSecret(m, Hmac(k, {"node-a", "hello", "1"})));
  CHECK(!SameSecret(m, Hmac(k, {"hellonode-a", "1"})));  // separators count
  CHECK(!SameSecret(m, Hmac("0123456789abcdeF", {"hello", "node-a", "1"})));
  CHECK(!SameSecret(m, m.substr(0, 31)));
  CHECK(RandomHex(16).size() == 32);
  CHECK(RandomHex(16) != RandomHex(16));
}

}  // namespace ISOMETRY_TEST_FILE
