// The ring of ended transfers behind isoctl transfers
// --recent, and its config key.
#include "daemon/node/transfer_history.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/config_parser.h"
#include "daemon/node/node.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// The ring as the node uses it, holding reports here: what it keeps and
// drops does not depend on the entry.
using TransferHistory = isometry::TransferHistory<TransferReport>;

TransferReport Ended(uint64_t id) {
  TransferReport r;
  r.id = id;
  r.state = "done";
  r.bytes = id * 100;
  r.path = std::string(64, 'p');  // a heap string each, as a path's text is
  return r;
}

std::vector<uint64_t> Ids(const TransferHistory& h) {
  std::vector<uint64_t> ids;
  for (const TransferReport& r : h.NewestFirst()) ids.push_back(r.id);
  return ids;
}

// The default config's text with daemon.transfer_history set to `value`.
std::string WithHistory(const std::string& value) {
  std::string text(EmbeddedDefaultConfig());
  const std::string key = "transfer_history = 256";
  const size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  return text.replace(at, key.size(), "transfer_history = " + value);
}

}  // namespace

TEST_CASE("the transfer history keeps the last ones, newest first, and no more") {
  TransferHistory h(3);
  CHECK(h.NewestFirst().empty());
  h.Add(Ended(1));
  h.Add(Ended(2));
  CHECK(Ids(h) == std::vector<uint64_t>{2, 1});
  h.Add(Ended(3));
  CHECK(Ids(h) == std::vector<uint64_t>{3, 2, 1});
  // Full: each one more takes the oldest's place; the size stays at the bound.
  for (uint64_t id = 4; id <= 1000; ++id) {
    h.Add(Ended(id));
    REQUIRE(h.size() == 3);
  }
  CHECK(Ids(h) == std::vector<uint64_t>{1000, 999, 998});
  const std::vector<TransferReport> kept = h.NewestFirst();
  CHECK(kept[0].bytes == 100000);
  CHECK(kept[2].state == "done");
}

TEST_CASE("a transfer history of capacity 0 keeps nothing") {
  TransferHistory off(0);
  for (uint64_t id = 1; id <= 10; ++id) off.Add(Ended(id));
  CHECK(off.size() == 0);
  CHECK(off.NewestFirst().empty());
  TransferHistory one(1);
  one.Add(Ended(1));
  one.Add(Ended(2));
  CHECK(Ids(one) == std::vector<uint64_t>{2});
}

TEST_CASE("daemon.transfer_history: 256 by default, 0 turns it off, bounded above") {
  auto c = ParseConfig(EmbeddedDefaultConfig(), "default");
  REQUIRE(c.ok());
  CHECK(c->daemon.transfer_history == 256);
  c = ParseConfig(WithHistory("0"), "test.toml");
  REQUIRE(c.ok());
  CHECK(c->daemon.transfer_history == 0);
  c = ParseConfig(WithHistory("70000"), "test.toml");
  REQUIRE(!c.ok());
  CHECK(std::string(c.status().message()).find("daemon.transfer_history") != std::string::npos);
}

}  // namespace ISOMETRY_TEST_FILE
