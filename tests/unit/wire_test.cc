// A data connection's byte stream with mutual TLS (net/wire.h):
// the files are checked before any connection, a handshake proves both
// names, and one reader and one writer per end move bytes both ways at
// once, in OpenSSL's records or in sealed records (which refuse a record
// no key of the session made).
#include "net/wire.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "unit/socket_pair.h"

namespace isometry::net {
namespace ISOMETRY_TEST_FILE {
namespace {

// A test CA per name (scripts/make-test-ca.sh), made once per run.
std::string Ca(const std::string& name) {
  std::string dir = StrCat("/tmp/iso-wire-test-", ::getpid(), "-", name);
  if (::access((dir + "/ca.pem").c_str(), R_OK) != 0) {
    const std::string cmd =
        StrCat("sh ", ISOMETRY_SOURCE_DIR, "/scripts/make-test-ca.sh ", dir, " a b >/dev/null");
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  return dir;
}

TlsFiles Files(const std::string& ca_dir, const std::string& node) {
  return {ca_dir + "/ca.pem", ca_dir + "/" + node + ".pem", ca_dir + "/" + node + ".key"};
}

std::string ErrorOf(const TlsFiles& f, const std::string& node) {
  auto r = TlsContext::Create(f, node);
  return r.ok() ? "" : std::string(r.status().message());
}

// OpenSSL writes with write(2): like isometryd, ignore SIGPIPE.
const bool kNoSigpipe = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

TEST_CASE("TLS files are checked before any connection, naming the file") {
  const std::string one = Ca("one"), other = Ca("other");
  REQUIRE(TlsContext::Create(Files(one, "a"), "a").ok());
  CHECK_THAT(ErrorOf(Files(one, "b"), "a"), Catch::Contains("is for 'b', not this node 'a'"));
  TlsFiles mixed = Files(one, "a");
  mixed.key_file = one + "/b.key";
  CHECK_THAT(ErrorOf(mixed, "a"), Catch::Contains("does not match the certificate"));
  mixed = Files(one, "a");
  mixed.ca_file = other + "/ca.pem";
  CHECK_THAT(ErrorOf(mixed, "a"), Catch::Contains("does not verify against cluster.tls.ca_file"));
  mixed = Files(one, "a");
  mixed.key_file = one + "/a.pem";  // a certificate is not a key
  CHECK_THAT(ErrorOf(mixed, "a"), Catch::Contains("is not a readable PEM private key"));
  mixed = Files(one, "a");
  mixed.ca_file = "/nonexistent/ca.pem";
  CHECK_THAT(ErrorOf(mixed, "a"), Catch::Contains("'/nonexistent/ca.pem'"));
}

// Handshakes a (accepting) with b (connecting, expecting `expect`).
std::pair<Status, Status> Handshake(Wire& a, Wire& b, const TlsContext& ca, const TlsContext& cb,
                                    const std::string& expect) {
  Status sa;
  std::thread t([&] { sa = a.StartTls(ca, /*accepting=*/true, "", 5000); });
  const Status sb = b.StartTls(cb, /*accepting=*/false, expect, 5000);
  t.join();
  return {sa, sb};
}

// Each end's writer and reader at once, as a connection's threads do:
// `n` bytes each way, in `pieces` Send and Recv calls per direction.
void BothWays(Wire& a, Wire& b, size_t n, size_t pieces = 1) {
  std::vector<char> to_b(n), to_a(n), got_a(n), got_b(n);
  for (size_t i = 0; i < n; ++i) {
    to_b[i] = static_cast<char>(i * 7);
    to_a[i] = static_cast<char>(i * 13 + 1);
  }
  const size_t piece = n / pieces;
  auto send = [&](Wire& w, std::vector<char>& v) {
    for (size_t at = 0; at < n; at += piece) {
      iovec iov{v.data() + at, std::min(piece, n - at)};
      ISO_RETURN_IF_ERROR(w.Send(&iov, 1));
    }
    return OkStatus();
  };
  auto recv = [&](Wire& w, std::vector<char>& v) {
    for (size_t at = 0; at < n; at += piece) {
      ISO_RETURN_IF_ERROR(w.Recv(v.data() + at, std::min(piece, n - at)));
    }
    return OkStatus();
  };
  Status s1, s2, s3, s4;
  std::thread w1([&] { s1 = send(a, to_b); });
  std::thread w2([&] { s2 = send(b, to_a); });
  std::thread r1([&] { s3 = recv(a, got_a); });
  std::thread r2([&] { s4 = recv(b, got_b); });
  for (std::thread* t : {&w1, &w2, &r1, &r2}) t->join();
  CHECK(s1.ok());
  CHECK(s2.ok());
  CHECK(s3.ok());
  CHECK(s4.ok());
  CHECK(got_a == to_a);
  CHECK(got_b == to_b);
}

TEST_CASE("mutual TLS: both names proven, bytes both ways at once") {
  const std::string one = Ca("one");
  auto ta = TlsContext::Create(Files(one, "a"), "a");
  auto tb = TlsContext::Create(Files(one, "b"), "b");
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  testing::SocketPair p = testing::MakeSocketPair();
  Wire a(std::move(p.a), "a-end"), b(std::move(p.b), "b-end");
  auto [sa, sb] = Handshake(a, b, **ta, **tb, "a");
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  CHECK(a.tls());
  CHECK(a.PeerIs("b"));
  CHECK_FALSE(a.PeerIs("c"));
  CHECK(b.PeerIs("a"));
  CHECK(a.CanSeal());  // a unix socket: never kTLS
  SECTION("OpenSSL's records, read ahead") {
    BothWays(a, b, 8 << 20);
    REQUIRE(a.EndHello(false, /*accepting=*/true).ok());
    REQUIRE(b.EndHello(false, /*accepting=*/false).ok());
    CHECK_FALSE(a.sealed());
    BothWays(a, b, 8 << 20);
  }
  SECTION("sealed records, a new key every 3 records") {
    BothWays(a, b, 1000);  // the hello, in OpenSSL's records
    REQUIRE(a.EndHello(true, /*accepting=*/true, 3).ok());
    REQUIRE(b.EndHello(true, /*accepting=*/false, 3).ok());
    CHECK(a.sealed());
    BothWays(a, b, 8 << 20);
    BothWays(a, b, size_t{48} * 1000, 1000);  // records smaller than a read
    BothWays(a, b, 1 << 20, 3);
  }
  // A closed peer ends a waiting read with an error, not a hang.
  b.Shutdown();
  char c;
  CHECK_FALSE(a.Recv(&c, 1).ok());
}

TEST_CASE("sealed records: a forged or oversized record is refused") {
  const std::string one = Ca("one");
  auto ta = TlsContext::Create(Files(one, "a"), "a");
  auto tb = TlsContext::Create(Files(one, "b"), "b");
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  for (const uint32_t length : {16u, (64u << 10) + 1}) {
    testing::SocketPair p = testing::MakeSocketPair();
    Wire a(std::move(p.a), "a-end"), b(std::move(p.b), "b-end");
    auto [sa, sb] = Handshake(a, b, **ta, **tb, "a");
    REQUIRE(sa.ok());
    REQUIRE(sb.ok());
    REQUIRE(a.EndHello(true, /*accepting=*/true).ok());
    REQUIRE(b.EndHello(true, /*accepting=*/false).ok());
    // One real record, then one written around b's sealing: a length, 16
    // bytes and a tag that no key made.
    BothWays(a, b, 100);
    std::vector<char> forged(4 + 16 + 16, 'x');
    std::memcpy(forged.data(), &length, 4);
    REQUIRE(::send(b.fd(), forged.data(), forged.size(), 0) == static_cast<ssize_t>(forged.size()));
    char got[16];
    const Status s = a.Recv(got, sizeof got);
    CHECK(absl::IsDataLoss(s));
    CHECK_THAT(std::string(s.message()),
               Catch::Contains(length == 16 ? "failed authentication" : "at most 65536"));
  }
}

TEST_CASE("TLS refuses a peer of another CA, and a server of another name") {
  const std::string one = Ca("one"), other = Ca("other");
  auto ta = TlsContext::Create(Files(one, "a"), "a");
  auto tb = TlsContext::Create(Files(other, "b"), "b");
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  {
    testing::SocketPair p = testing::MakeSocketPair();
    Wire a(std::move(p.a), "a-end"), b(std::move(p.b), "b-end");
    auto [sa, sb] = Handshake(a, b, **ta, **tb, "a");
    CHECK_FALSE(sa.ok());
    CHECK(absl::IsUnauthenticated(sb));
    CHECK_THAT(std::string(sb.message()), Catch::Contains("certificate"));
  }
  {
    auto tb1 = TlsContext::Create(Files(one, "b"), "b");
    REQUIRE(tb1.ok());
    testing::SocketPair p = testing::MakeSocketPair();
    Wire a(std::move(p.a), "a-end"), b(std::move(p.b), "b-end");
    auto [sa, sb] = Handshake(a, b, **ta, **tb1, "c");  // b expects a server named c
    CHECK_FALSE(sb.ok());
    CHECK_THAT(std::string(sb.message()), Catch::Contains("certificate was refused"));
  }
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry::net
