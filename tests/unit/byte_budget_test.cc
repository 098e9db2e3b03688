#include "daemon/node/byte_budget.h"

#include <catch2/catch.hpp>
#include <string>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("ByteBudget charges every budget or none, and a charge gives its bytes back") {
  auto session = std::make_shared<ByteBudget>("daemon.per_session", 100);
  auto node = std::make_shared<ByteBudget>("daemon.all", 150);
  auto a = ByteBudget::Take({session, node}, 60, "a put");
  REQUIRE(a.ok());
  CHECK(session->used() == 60);
  CHECK(node->used() == 60);
  // Past the session's budget: refused, naming its key, nothing charged.
  auto b = ByteBudget::Take({session, node}, 50, "a put");
  REQUIRE(absl::IsResourceExhausted(b.status()));
  CHECK(std::string(b.status().message()).find("daemon.per_session") != std::string::npos);
  CHECK(session->used() == 60);
  CHECK(node->used() == 60);
  // Past the node's (another session): the first budget is given back.
  auto other = std::make_shared<ByteBudget>("daemon.per_session", 100);
  auto c = ByteBudget::Take({other, node}, 95, "a datatype");
  REQUIRE(absl::IsResourceExhausted(c.status()));
  CHECK(std::string(c.status().message()).find("daemon.all") != std::string::npos);
  CHECK(other->used() == 0);
  // Null budgets are skipped; the last copy of a charge releases it.
  auto d = ByteBudget::Take({nullptr, node}, 90, "a peer's put");
  REQUIRE(d.ok());
  CHECK(node->used() == 150);
  std::shared_ptr<void> copy = *d;
  a->reset();
  CHECK(session->used() == 0);
  CHECK(node->used() == 90);
  d->reset();
  CHECK(node->used() == 90);
  copy.reset();
  CHECK(node->used() == 0);
  // More than the limit itself, and a limit of zero.
  CHECK(absl::IsResourceExhausted(ByteBudget::Take({session}, 101, "x").status()));
  auto none = std::make_shared<ByteBudget>("daemon.none", 0);
  CHECK(ByteBudget::Take({none}, 0, "x").ok());
  CHECK(absl::IsResourceExhausted(ByteBudget::Take({none}, 1, "x").status()));
}

}  // namespace ISOMETRY_TEST_FILE
