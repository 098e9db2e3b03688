// The records etcd membership writes and reads (daemon/cluster/etcd_membership.h):
// anyone with write access to etcd can write one, so reading checks them.
#include <catch2/catch.hpp>

#include "daemon/cluster/etcd_membership.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cluster;

TEST_CASE("a record written is read back as the same peer") {
  const std::string r = EtcdRecord(3, "10.0.0.3:7470", "node-c");
  CHECK(r == "node=3\naddress=10.0.0.3:7470\nidentity=node-c\n");
  auto p = ParseEtcdRecord("node-c", r);
  REQUIRE(p.ok());
  CHECK(p->name == "node-c");
  CHECK(p->address == "10.0.0.3:7470");
}

TEST_CASE("records with a bad name or address are refused with the reason") {
  const std::string good = EtcdRecord(1, "h:1", "");
  CHECK_THAT(std::string(ParseEtcdRecord("", good).status().message()),
             Catch::Contains("node name"));
  CHECK(!ParseEtcdRecord("a:b", good).ok());  // ':' would make a memory name ambiguous
  CHECK(!ParseEtcdRecord("a/b", good).ok());  // a key below the prefix's level
  CHECK(!ParseEtcdRecord(std::string(300, 'x'), good).ok());
  CHECK_THAT(std::string(ParseEtcdRecord("a", "node=1\n").status().message()),
             Catch::Contains("not host:port"));
  CHECK(!ParseEtcdRecord("a", "address=h:\n").ok());
  CHECK(!ParseEtcdRecord("a", "address=:1\n").ok());
  CHECK(!ParseEtcdRecord("a", std::string(5000, 'x')).ok());
  // Unknown lines are skipped: a later version may add some.
  CHECK(ParseEtcdRecord("a", "zone=x\naddress=h:1\nno equals sign\n").ok());
}

}  // namespace ISOMETRY_TEST_FILE
