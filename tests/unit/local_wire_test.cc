// The local handshake socket's framing (proto/local_wire.h): messages and
// file descriptors arrive whole across partial reads; oversized, truncated
// and malformed frames are refused with a clear error and leak no fd.
#include "proto/local_wire.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "isometry.pb.h"
#include "unit/socket_pair.h"

namespace isometry::wire {
namespace ISOMETRY_TEST_FILE {
namespace {

using testing::MakeSocketPair;
using testing::SocketPair;

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (::readdir(d)) ++n;
  ::closedir(d);
  return n;
}

// Writes raw bytes: a frame as a hostile or broken peer sends it.
void SendRaw(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

std::string LengthPrefix(uint32_t len) { return std::string(reinterpret_cast<char*>(&len), 4); }

v1::LocalResponse Response(uint64_t tag, std::string message) {
  v1::LocalResponse r;
  r.set_tag(tag);
  r.set_code(5);
  r.set_message(std::move(message));
  return r;
}

TEST_CASE("a message round-trips, one frame after another") {
  SocketPair p = MakeSocketPair();
  REQUIRE(SendFrame(p.a.get(), Response(1, "first")).ok());
  v1::LocalRequest req;
  req.set_tag(2);
  req.mutable_map()->set_allocation(77);
  REQUIRE(SendFrame(p.a.get(), req).ok());

  v1::LocalResponse got;
  std::vector<int> fds;
  REQUIRE(RecvFrame(p.b.get(), &got, &fds).ok());
  CHECK(got.tag() == 1);
  CHECK(got.code() == 5);
  CHECK(got.message() == "first");
  CHECK(fds.empty());
  v1::LocalRequest got_req;
  REQUIRE(RecvFrame(p.b.get(), &got_req, &fds).ok());
  CHECK(got_req.tag() == 2);
  CHECK(got_req.map().allocation() == 77);
}

TEST_CASE("file descriptors ride along and refer to the same files") {
  SocketPair p = MakeSocketPair();
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
  REQUIRE(SendFrame(p.a.get(), Response(3, "with fds"), {r.get(), w.get()}).ok());

  v1::LocalResponse got;
  std::vector<int> fds;
  REQUIRE(RecvFrame(p.b.get(), &got, &fds).ok());
  CHECK(got.message() == "with fds");
  REQUIRE(fds.size() == 2);
  UniqueFd got_r(fds[0]), got_w(fds[1]);
  CHECK(got_r.get() != r.get());  // new descriptors, same pipe
  REQUIRE(::write(got_w.get(), "ping", 4) == 4);
  char buf[4];
  REQUIRE(::read(r.get(), buf, 4) == 4);
  CHECK(std::memcmp(buf, "ping", 4) == 0);
}

TEST_CASE("a frame that arrives a byte at a time is received whole") {
  SocketPair p = MakeSocketPair();
  // Larger than the receiver's 64 KiB growth step, so the body is read in
  // several pieces too.
  const std::string text(200 << 10, 'q');
  std::string frame;
  REQUIRE(Response(9, text).SerializeToString(&frame));
  frame = LengthPrefix(static_cast<uint32_t>(frame.size())) + frame;
  bool sent = true;  // Catch2 assertions stay on the test's thread
  std::thread writer([&] {
    for (size_t at = 0; at < frame.size(); at += at < 64 ? 1 : 4093) {
      const size_t n = at < 64 ? 1 : std::min<size_t>(4093, frame.size() - at);
      sent &= ::send(p.a.get(), frame.data() + at, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
    }
  });
  v1::LocalResponse got;
  std::vector<int> fds;
  const Status s = RecvFrame(p.b.get(), &got, &fds);
  writer.join();
  REQUIRE(sent);
  REQUIRE(s.ok());
  CHECK(got.tag() == 9);
  CHECK(got.message() == text);
}

TEST_CASE("a frame over the limit is refused before its body is read, and its fds closed") {
  SocketPair p = MakeSocketPair();
  const int before = OpenFds();
  {
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
    REQUIRE(SendFrame(p.a.get(), Response(1, std::string(2000, 'x')), {r.get(), w.get()}).ok());
  }
  v1::LocalResponse got;
  std::vector<int> fds;
  const Status s = RecvFrame(p.b.get(), &got, &fds, /*max_bytes=*/1000);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find(" bytes exceeds the limit of 1000") != std::string::npos);
  CHECK(fds.empty());
  CHECK(OpenFds() == before);  // the two passed descriptors were closed

  // The default limit, announced by a length alone (on a fresh connection:
  // the refused frame's body is still in the first).
  SocketPair q = MakeSocketPair();
  SendRaw(q.a.get(), LengthPrefix(kMaxFrameBytes + 1));
  const Status big = RecvFrame(q.b.get(), &got, &fds);
  CHECK(big.code() == absl::StatusCode::kInvalidArgument);
  CHECK(big.message() ==
        StrCat("frame of ", kMaxFrameBytes + 1, " bytes exceeds the limit of ", kMaxFrameBytes));
}

TEST_CASE("a sender refuses what the receiver would refuse") {
  SocketPair p = MakeSocketPair();
  const Status big = SendFrame(p.a.get(), Response(1, std::string(kMaxFrameBytes + 1, 'x')));
  CHECK(big.code() == absl::StatusCode::kOutOfRange);
  CHECK(std::string(big.message()).find(" bytes is too large") != std::string::npos);
  const std::vector<int> too_many(kMaxFds + 1, p.a.get());
  const Status fds = SendFrame(p.a.get(), Response(1, "x"), too_many);
  CHECK(fds.code() == absl::StatusCode::kInternal);
  CHECK(fds.message() == "too many fds for one frame");
}

TEST_CASE("end of stream: between frames orderly, inside one an error") {
  v1::LocalResponse got;
  std::vector<int> fds;
  {
    SocketPair p = MakeSocketPair();
    p.a.reset();
    const Status s = RecvFrame(p.b.get(), &got, &fds);
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK(s.message() == "peer closed the connection");
  }
  {
    SocketPair p = MakeSocketPair();
    SendRaw(p.a.get(), LengthPrefix(100) + std::string(10, '\0'));
    p.a.reset();
    const Status s = RecvFrame(p.b.get(), &got, &fds);
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK(s.message() == "peer closed the connection mid-frame");
  }
  {
    SocketPair p = MakeSocketPair();
    SendRaw(p.a.get(), std::string(2, '\1'));  // half a length
    p.a.reset();
    const Status s = RecvFrame(p.b.get(), &got, &fds);
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK(s.message() == "peer closed the connection mid-frame");
  }
}

TEST_CASE("a body that is not a protobuf message is malformed, and its fds closed") {
  SocketPair p = MakeSocketPair();
  const int before = OpenFds();
  {
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
    // A frame whose body is junk, carrying two descriptors.
    const std::string junk(8, '\xff');  // an unterminated varint
    std::string frame = LengthPrefix(static_cast<uint32_t>(junk.size())) + junk;
    iovec iov{frame.data(), frame.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * 2);
    std::memcpy(CMSG_DATA(c), pipe_fds, sizeof(int) * 2);
    REQUIRE(::sendmsg(p.a.get(), &m, MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
  }
  v1::LocalResponse got;
  std::vector<int> fds;
  const Status s = RecvFrame(p.b.get(), &got, &fds);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "malformed frame (not a protobuf message)");
  CHECK(fds.empty());
  CHECK(OpenFds() == before);
}

TEST_CASE("more descriptors than a frame may carry are refused") {
  SocketPair p = MakeSocketPair();
  const int before = OpenFds();
  {
    std::string frame;
    REQUIRE(Response(1, "x").SerializeToString(&frame));
    frame = LengthPrefix(static_cast<uint32_t>(frame.size())) + frame;
    std::vector<int> many(kMaxFds + 4, p.a.get());
    iovec iov{frame.data(), frame.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * many.size()));
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * many.size());
    std::memcpy(CMSG_DATA(c), many.data(), sizeof(int) * many.size());
    REQUIRE(::sendmsg(p.a.get(), &m, MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
  }
  v1::LocalResponse got;
  std::vector<int> fds;
  const Status s = RecvFrame(p.b.get(), &got, &fds);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "too many file descriptors in a frame");
  CHECK(fds.empty());
  CHECK(OpenFds() == before);  // what did arrive was closed
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry::wire
