// daemon/cluster/form_exchange: the receiver's memo is a bounded LRU, a
// form is taken only when its bytes hash to the name it came under, a
// reference to an unknown hash asks for the bytes again, and the sender
// trusts a remembered hash only for the very form it remembers.
#include "daemon/cluster/form_exchange.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cluster;

namespace {

CanonicalForm Vector(int64_t count, int64_t run, int64_t stride) {
  return CanonicalForm{{FormPiece{0, run, {FormLoop{count, stride}}, {}}}};
}

std::shared_ptr<const CanonicalForm> Shared(CanonicalForm f) {
  return std::make_shared<const CanonicalForm>(std::move(f));
}

}  // namespace

TEST_CASE("form memo: least recently used goes first, bounded in entries and bytes") {
  FormMemo memo(2, 100);
  memo.Put(1, Shared(Vector(2, 8, 16)), 40);
  memo.Put(2, Shared(Vector(3, 8, 16)), 40);
  REQUIRE(memo.Find(1));  // 2 is now the least recent
  memo.Put(3, Shared(Vector(4, 8, 16)), 40);
  CHECK(memo.Find(1));
  CHECK(!memo.Find(2));
  CHECK(memo.Find(3));
  CHECK(memo.bytes() == 80);
  memo.Put(4, Shared(Vector(5, 8, 16)), 90);  // over the bytes with anything else
  CHECK(memo.size() == 1);
  CHECK(memo.bytes() == 90);
  memo.Put(5, Shared(Vector(6, 8, 16)), 101);  // alone over the bound: not kept
  CHECK(!memo.Find(5));
  CHECK(memo.Find(4));
}

TEST_CASE("form exchange: receive once, then by hash; unknown hashes ask again") {
  FormExchange x;
  const CanonicalForm f = Vector(64, 8, 512);
  const std::string bytes = SerializeForm(f);
  const uint64_t hash = FormHash(f);
  Result<std::shared_ptr<const CanonicalForm>> miss = x.Resolve("a", hash, "");
  REQUIRE(!miss.ok());
  CHECK(UnknownFormOf(miss.status()) == hash);
  CHECK(!UnknownFormOf(InvalidArgument("other")));
  REQUIRE(x.Resolve("a", hash, bytes).ok());
  auto hit = x.Resolve("a", hash, "");
  REQUIRE(hit.ok());
  CHECK(**hit == f);
  CHECK(!x.Resolve("b", hash, "").ok());  // memos are per peer
  // Bytes that do not hash to the name, or do not parse.
  auto wrong = x.Resolve("a", hash + 1, bytes);
  REQUIRE(!wrong.ok());
  CHECK(wrong.status().message().find("hashes to") != std::string::npos);
  CHECK(!x.Resolve("a", 7, "ISOFORM1").ok());
  const FormExchangeStats s = x.Stats();
  CHECK(s.received == 1);
  CHECK(s.memo_hits == 1);
  CHECK(s.memo_misses == 2);
  CHECK(s.memo_bytes == bytes.size());
}

TEST_CASE("form exchange: the sender trusts a hash only for the form it remembers") {
  FormExchange x;
  const auto f = Shared(Vector(64, 8, 512));
  const uint64_t hash = FormHash(*f);
  CHECK(!x.Known("b", hash, *f));
  x.Acknowledged("b", hash, f, 100);
  CHECK(x.Known("b", hash, *f));
  CHECK(!x.Known("c", hash, *f));
  CHECK(!x.Known("b", hash, Vector(65, 8, 512)));  // a colliding form goes with its bytes
  x.Forget("b", hash);
  CHECK(!x.Known("b", hash, *f));
}

}  // namespace ISOMETRY_TEST_FILE
