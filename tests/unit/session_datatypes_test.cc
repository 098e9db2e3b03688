// daemon/node/session_datatypes: a session's datatype table answers for its
// own handles only, stays within its count and both byte budgets (the
// session's and the node's), keeps a bounded number of translations per
// handle, gives every byte back when the session ends and refuses handles
// after that; and it may be used from many threads at once.
#include "daemon/node/session_datatypes.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

Datatype Vec(int64_t count) {
  return *Datatype::Vector(count, 1, 2, Datatype::Basic(BasicType::kInt32));
}

CanonicalForm FormOf(const Datatype& t, int64_t count) { return *DatatypeForm(t, count); }

struct Budgets {
  std::shared_ptr<ByteBudget> session = std::make_shared<ByteBudget>("session", 1 << 20);
  std::shared_ptr<ByteBudget> node = std::make_shared<ByteBudget>("node", 1 << 20);
};

}  // namespace

TEST_CASE("a session's datatypes: its own handles, within its count") {
  Budgets b;
  SessionDatatypes table(b.session, b.node);
  const Datatype t = Vec(4);
  REQUIRE(table.Add(7, t, FormOf(t, 1), 100, 2).ok());
  REQUIRE(table.Add(8, Vec(2), FormOf(Vec(2), 1), 100, 2).ok());
  CHECK(table.size() == 2);
  const Status third = table.Add(9, t, FormOf(t, 1), 100, 2);
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(third.message()).find("max_datatypes_per_session is 2") != std::string::npos);
  CHECK(table.size() == 2);

  REQUIRE(table.Type(7).ok());
  CHECK(table.Type(7)->size() == t.size());
  CHECK(table.Type(9).status().code() == absl::StatusCode::kNotFound);
  // The form of one element was kept at registration; others are not yet.
  REQUIRE(table.KeptForm(7, 1).ok());
  CHECK(*table.KeptForm(7, 1) != nullptr);
  CHECK(*table.KeptForm(7, 3) == nullptr);
  CHECK(table.KeptForm(9, 1).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a session's datatypes: both budgets bound them, and come back at close") {
  Budgets b;
  b.session = std::make_shared<ByteBudget>("daemon.max_datatype_bytes_per_session", 4096);
  SessionDatatypes table(b.session, b.node);
  const Datatype t = Vec(4);
  const Status big = table.Add(1, t, FormOf(t, 1), 8192, 100);
  CHECK(big.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(big.message()).find("max_datatype_bytes_per_session") != std::string::npos);
  CHECK(b.session->used() == 0);
  CHECK(b.node->used() == 0);  // nothing charged on a refusal

  REQUIRE(table.Add(1, t, FormOf(t, 1), 512, 100).ok());
  const uint64_t one = b.session->used();
  CHECK(one >= 512);
  CHECK(b.node->used() == one);
  table.Keep(1, 3, std::make_shared<const CanonicalForm>(FormOf(t, 3)));
  CHECK(*table.KeptForm(1, 3) != nullptr);
  CHECK(b.session->used() > one);
  CHECK(b.node->used() == b.session->used());

  table.Close();
  CHECK(b.session->used() == 0);
  CHECK(b.node->used() == 0);
  CHECK(table.size() == 0);
  CHECK(table.Type(1).status().code() == absl::StatusCode::kNotFound);
  // A call that found the session before it ended registers nothing.
  const Status late = table.Add(2, t, FormOf(t, 1), 16, 100);
  CHECK(late.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(b.node->used() == 0);
}

TEST_CASE("a session's datatypes: a bounded number of translations per handle") {
  Budgets b;
  SessionDatatypes table(b.session, b.node);
  const Datatype t = Vec(2);
  REQUIRE(table.Add(1, t, FormOf(t, 1), 16, 10).ok());
  for (int64_t count = 2; count < 40; ++count) {
    table.Keep(1, count, std::make_shared<const CanonicalForm>(FormOf(t, count)));
  }
  size_t kept = 0;
  for (int64_t count = 1; count < 40; ++count) kept += *table.KeptForm(1, count) != nullptr;
  CHECK(kept == SessionDatatypes::kFormsKept);
  // Keeping for an unknown handle does nothing and charges nothing.
  const uint64_t before = b.node->used();
  table.Keep(99, 2, std::make_shared<const CanonicalForm>(FormOf(t, 2)));
  CHECK(b.node->used() == before);
}

TEST_CASE("a session's datatypes: registered and looked up from many threads") {
  Budgets b;
  SessionDatatypes table(b.session, b.node);
  const Datatype t = Vec(3);
  std::vector<std::thread> threads;
  for (uint64_t w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t i = 0; i < 50; ++i) {
        const uint64_t handle = w * 1000 + i;
        if (!table.Add(handle, t, FormOf(t, 1), 64, 1000).ok()) continue;
        if (table.Type(handle).ok()) {
          table.Keep(handle, 2, std::make_shared<const CanonicalForm>(FormOf(t, 2)));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(table.size() == 200);
  for (uint64_t w = 0; w < 4; ++w) CHECK(*table.KeptForm(w * 1000 + 49, 2) != nullptr);
  table.Close();
  CHECK(b.node->used() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
