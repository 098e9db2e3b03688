// The peer data connection's framing and socket helpers (net/frame.h),
// through the header only: headers checked before a payload is
// trusted, whole buffers across short reads and writes, errors that say
// what broke.
#include "net/frame.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "core/unique_fd.h"
#include "unit/copy_ops.h"
#include "unit/socket_pair.h"

namespace isometry::net {
namespace ISOMETRY_TEST_FILE {
namespace {

using testing::MakeSocketPair;
using testing::SocketPair;

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) & 0xff);
  }
  return v;
}

FrameHeader Header(FrameType type, uint64_t length) {
  FrameHeader h;
  h.type = type;
  h.length = length;
  return h;
}

TEST_CASE("a header is checked before its payload is trusted") {
  CHECK(CheckHeader(Header(FrameType::kHello, 16)).ok());
  CHECK(CheckHeader(Header(FrameType::kData, kMaxDataPayload)).ok());
  CHECK(CheckHeader(Header(FrameType::kCredit, kMaxControlPayload)).ok());

  FrameHeader bad_magic = Header(FrameType::kHello, 0);
  bad_magic.magic = 0x12345678;
  Status s = CheckHeader(bad_magic);
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() == "bad frame magic (not an Isometry peer?)");

  FrameHeader other_version = Header(FrameType::kHello, 0);
  other_version.version = kDataProtocolVersion + 1;
  s = CheckHeader(other_version);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == StrCat("data protocol version ", kDataProtocolVersion + 1,
                              ", this node speaks ", kDataProtocolVersion));

  for (const uint8_t t : {0, 9, 255}) {
    FrameHeader h = Header(FrameType::kHello, 0);
    h.type = static_cast<FrameType>(t);
    s = CheckHeader(h);
    CHECK(s.code() == absl::StatusCode::kDataLoss);
    CHECK(s.message() == StrCat("unknown frame type ", t));
  }

  // Oversized: control frames are small, data frames bounded.
  for (const FrameType t : {FrameType::kHello, FrameType::kCredit, FrameType::kAbort}) {
    s = CheckHeader(Header(t, kMaxControlPayload + 1));
    CHECK(s.code() == absl::StatusCode::kDataLoss);
    CHECK(s.message() == StrCat("frame payload of ", kMaxControlPayload + 1, " bytes exceeds ",
                                kMaxControlPayload));
  }
  s = CheckHeader(Header(FrameType::kData, kMaxDataPayload + 1));
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() ==
        StrCat("frame payload of ", kMaxDataPayload + 1, " bytes exceeds ", kMaxDataPayload));
}

TEST_CASE("an abort's code from the wire is always an error") {
  CHECK(ErrorCodeFromWire(5) == absl::StatusCode::kNotFound);
  CHECK(ErrorCodeFromWire(16) == absl::StatusCode::kUnauthenticated);
  // OK, negative and unknown codes would end a transfer "done" or oddly.
  for (const int64_t code : {0ll, -1ll, 17ll, 1ll << 40}) {
    CHECK(ErrorCodeFromWire(code) == absl::StatusCode::kAborted);
  }
}

TEST_CASE("a frame round-trips: header then payload, bytes unchanged") {
  SocketPair p = MakeSocketPair();
  const std::vector<char> payload = Pattern(1000, 3);
  FrameHeader h = Header(FrameType::kData, payload.size());
  h.transfer = 42;
  h.chunk = 7;
  h.code = 9;
  h.flags = kFlagChecksum;
  h.checksum = 0x0123456789abcdefull;
  REQUIRE(SendFrame(p.a.get(), h, payload.data()).ok());
  REQUIRE(SendFrame(p.a.get(), Header(FrameType::kCredit, 0)).ok());  // no payload

  FrameHeader got;
  REQUIRE(RecvAll(p.b.get(), &got, sizeof got).ok());
  REQUIRE(CheckHeader(got).ok());
  CHECK(got.type == FrameType::kData);
  CHECK(got.transfer == 42);
  CHECK(got.chunk == 7);
  CHECK(got.code == 9);
  CHECK(got.flags == kFlagChecksum);
  CHECK(got.checksum == 0x0123456789abcdefull);
  REQUIRE(got.length == payload.size());
  std::vector<char> body(got.length);
  REQUIRE(RecvAll(p.b.get(), body.data(), body.size()).ok());
  CHECK(body == payload);

  REQUIRE(RecvAll(p.b.get(), &got, sizeof got).ok());
  CHECK(got.type == FrameType::kCredit);
  CHECK(got.length == 0);
}

TEST_CASE("whole buffers across short writes and reads") {
  SocketPair p = MakeSocketPair();
  // A small send buffer: every sendmsg moves part of the iovecs, and the
  // next must start inside an iovec; more iovecs than one sendmsg takes.
  const int small = 4096;
  REQUIRE(::setsockopt(p.a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
  const std::vector<char> data = Pattern(3 << 20, 5);
  std::vector<iovec> iov;
  for (size_t at = 0, n = 1; at < data.size(); at += n, n = n % 997 + 1) {
    n = std::min(n, data.size() - at);
    iov.push_back({const_cast<char*>(data.data() + at), n});
  }
  REQUIRE(iov.size() > 1024);
  std::vector<char> got(data.size());
  Status recv_status;
  std::thread reader([&] {
    // Reads in odd pieces so the writer stalls on a full buffer often.
    size_t at = 0;
    for (size_t n = 1; at < got.size() && recv_status.ok(); at += n, n = n * 7 % 65521 + 1) {
      n = std::min(n, got.size() - at);
      recv_status = RecvAll(p.b.get(), got.data() + at, n);
    }
  });
  const Status sent = SendAll(p.a.get(), iov.data(), static_cast<int>(iov.size()));
  reader.join();
  REQUIRE(sent.ok());
  REQUIRE(recv_status.ok());
  CHECK(got == data);
}

TEST_CASE("a frame many system calls long goes whole, iovecs cut at each call's bound") {
  SocketPair p = MakeSocketPair();
  // A header, then a payload that ends inside the fourth bound and whose
  // iovecs cross bounds mid-iovec: each call cuts its last iovec short and
  // must put it back for the next.
  const std::vector<char> head = Pattern(40, 2), body = Pattern(3 * kMaxBytesPerCall + 17, 3);
  std::vector<iovec> iov = {
      {const_cast<char*>(head.data()), head.size()},
      {const_cast<char*>(body.data()), kMaxBytesPerCall},
      {const_cast<char*>(body.data()) + kMaxBytesPerCall, body.size() - kMaxBytesPerCall}};
  std::vector<char> got(head.size() + body.size());
  Status recv_status;
  std::thread reader([&] { recv_status = RecvAll(p.b.get(), got.data(), got.size()); });
  const Status sent = SendAll(p.a.get(), iov.data(), static_cast<int>(iov.size()));
  reader.join();
  REQUIRE(sent.ok());
  REQUIRE(recv_status.ok());
  CHECK(std::equal(head.begin(), head.end(), got.begin()));
  CHECK(std::equal(body.begin(), body.end(), got.begin() + static_cast<ptrdiff_t>(head.size())));
}

TEST_CASE("RecvAll waits for a payload that arrives in pieces") {
  SocketPair p = MakeSocketPair();
  const std::vector<char> data = Pattern(10000, 11);
  bool sent = true;  // Catch2 assertions stay on the test's thread
  std::thread writer([&] {
    for (size_t at = 0; at < data.size(); at += 1234) {
      const size_t n = std::min<size_t>(1234, data.size() - at);
      sent &= ::send(p.a.get(), data.data() + at, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<char> got(data.size());
  const Status s = RecvAll(p.b.get(), got.data(), got.size());
  writer.join();
  REQUIRE(sent);
  REQUIRE(s.ok());
  CHECK(got == data);
}

TEST_CASE("a peer that closes mid-buffer is UNAVAILABLE, not a hang or a short success") {
  SocketPair p = MakeSocketPair();
  const std::vector<char> half = Pattern(100, 1);
  REQUIRE(::send(p.a.get(), half.data(), half.size(), MSG_NOSIGNAL) == 100);
  p.a.reset();
  std::vector<char> got(200);
  const Status s = RecvAll(p.b.get(), got.data(), got.size());
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(s.message() == "connection closed by the peer");
}

TEST_CASE("sending to a closed peer is UNAVAILABLE and raises no SIGPIPE") {
  SocketPair p = MakeSocketPair();
  p.b.reset();
  const std::vector<char> payload = Pattern(64, 2);
  const Status s = SendFrame(p.a.get(), Header(FrameType::kAbort, payload.size()), payload.data());
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(s.message() == StrCat("send: ", ErrnoString(EPIPE)));
}

TEST_CASE("Discard skips exactly the payload it is told to") {
  SocketPair p = MakeSocketPair();
  const std::vector<char> skipped = Pattern(3 << 20, 4);  // more than Discard's 1 MiB sink
  const std::vector<char> next = Pattern(16, 9);
  Status sent;
  std::thread writer([&] {
    iovec iov[2] = {{const_cast<char*>(skipped.data()), skipped.size()},
                    {const_cast<char*>(next.data()), next.size()}};
    sent = SendAll(p.a.get(), iov, 2);
  });
  const Status s = Discard(p.b.get(), skipped.size());
  writer.join();
  REQUIRE(sent.ok());
  REQUIRE(s.ok());
  std::vector<char> got(16);
  REQUIRE(RecvAll(p.b.get(), got.data(), got.size()).ok());
  CHECK(got == next);
}

TEST_CASE("listen, connect and exchange a frame over loopback TCP") {
  auto listening = ListenOn("127.0.0.1:0");
  REQUIRE(listening.ok());
  UniqueFd listener = std::move(listening->first);
  const std::string& address = listening->second;
  CHECK(address.rfind("127.0.0.1:", 0) == 0);
  CHECK(address != "127.0.0.1:0");  // the port the kernel chose

  auto connected = ConnectTo(address, 5000);
  REQUIRE(connected.ok());
  UniqueFd client = *std::move(connected);
  TuneSocket(client.get(), 2000, 128u << 10);
  UniqueFd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(server.valid());
  // The unsent limit took (cluster.unsent_limit).
  int lowat = 0;
  socklen_t len = sizeof lowat;
  REQUIRE(::getsockopt(client.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, &len) == 0);
  CHECK(lowat == 128 << 10);

  const std::vector<char> payload = Pattern(5000, 8);
  REQUIRE(SendFrame(client.get(), Header(FrameType::kHello, payload.size()), payload.data()).ok());
  FrameHeader got;
  REQUIRE(RecvAll(server.get(), &got, sizeof got).ok());
  REQUIRE(CheckHeader(got).ok());
  std::vector<char> body(got.length);
  REQUIRE(RecvAll(server.get(), body.data(), body.size()).ok());
  CHECK(body == payload);
}

TEST_CASE("bad addresses and refused connections say which address") {
  for (const char* bad : {"no-port", "127.0.0.1:", ""}) {
    INFO(bad);
    auto c = ConnectTo(bad, 1000);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(c.status().message() == StrCat("address '", bad, "' is not host:port"));
    auto l = ListenOn(bad);
    REQUIRE_FALSE(l.ok());
    CHECK(l.status().code() == absl::StatusCode::kInvalidArgument);
  }
  // A port nobody listens on any more: refused, named.
  auto listening = ListenOn("127.0.0.1:0");
  REQUIRE(listening.ok());
  const std::string address = listening->second;
  listening->first.reset();
  auto c = ConnectTo(address, 2000);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kUnavailable);
  CHECK(c.status().message() == StrCat("connect to ", address, ": ", ErrnoString(ECONNREFUSED)));
}

CopyOp Op(uint64_t src, uint64_t dst, uint64_t run, std::vector<CopyLoop> loops = {}) {
  return isometry::testing::Strided(src, dst, run, std::move(loops));
}

TEST_CASE("spans cover the first to the last byte a program touches on each side") {
  CopyProgram contiguous;
  contiguous.ops = {Op(0, 0, 4096)};
  CHECK(SourceSpan(contiguous) == 4096);
  CHECK(DestinationSpan(contiguous) == 4096);
  CHECK(WireIsOneRun(contiguous, true));
  CHECK(WireIsOneRun(contiguous, false));

  // 8-byte runs gathered from a stride of 32 into a dense destination.
  CopyProgram gather;
  gather.ops = {Op(16, 0, 8, {{.count = 10, .src_stride = 32, .dst_stride = 8}})};
  CHECK(SourceSpan(gather) == 16 + 9 * 32 + 8);
  CHECK(DestinationSpan(gather) == 80);
  CHECK_FALSE(WireIsOneRun(gather, true));  // loops: not one run

  // Two ops: the span ends at the furthest byte of either.
  CopyProgram two;
  two.ops = {Op(0, 100, 50), Op(500, 0, 20)};
  CHECK(SourceSpan(two) == 520);
  CHECK(DestinationSpan(two) == 150);
  CHECK_FALSE(WireIsOneRun(two, false));

  // One run, but not at the wire side's offset 0.
  CopyProgram offset;
  offset.ops = {Op(0, 64, 100)};
  CHECK(WireIsOneRun(offset, false));
  CHECK_FALSE(WireIsOneRun(offset, true));
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry::net
