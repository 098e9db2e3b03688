// The data port's event loop (net/hello_acceptor.h) without a
// daemon: a real hello admitted, the hello table bounded (the oldest
// closed for a new one), a silent connection closed at its timeout, and a
// bad first frame refused with an ABORT that says why.
#include "net/hello_acceptor.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "net/frame.h"

namespace isometry::net {
namespace ISOMETRY_TEST_FILE {
namespace {

struct Port {
  std::unique_ptr<HelloAcceptor> acceptor;
  std::string address;
  std::atomic<int> admitted{0};
};

void Serve(Port& port, int max_pending, uint32_t timeout_ms) {
  auto bound = ListenOn("127.0.0.1:0");
  REQUIRE(bound.ok());
  port.address = bound->second;
  HelloAcceptor::Options o;
  o.max_pending = max_pending;
  o.timeout_ms = timeout_ms;
  auto check = [](const HelloProof& h) -> Result<HelloAnswer> {
    if (h.proof == "good proof") return HelloAnswer{"peer", "answer"};
    return absl::UnauthenticatedError("bad proof");
  };
  auto admitted = [&port](const std::string& peer, std::unique_ptr<Wire>,
                          const HelloAcceptor::Settled&) {
    CHECK(peer == "peer");
    ++port.admitted;
    return OkStatus();
  };
  auto a = HelloAcceptor::Start(std::move(bound->first), o, check, admitted);
  REQUIRE(a.ok());
  port.acceptor = std::move(*a);
}

UniqueFd Connect(const std::string& address) {
  auto fd = ConnectTo(address, 2000);
  REQUIRE(fd.ok());
  return std::move(*fd);
}

// True once the acceptor closed `fd` (after an ABORT frame, or none)
// within `ms`.
bool ClosedWithin(int fd, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1) return false;
    char buf[256];
    if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return true;  // EOF or reset
  }
}

FrameHeader Frame(FrameType type, uint64_t length, uint32_t code = 0) {
  FrameHeader h;
  h.type = type;
  h.length = length;
  h.code = code;
  return h;
}

TEST_CASE("a hello with a good proof is admitted", "[hello_acceptor]") {
  Port port;
  Serve(port, 4, 2000);
  UniqueFd fd = Connect(port.address);
  const std::string nonce(32, 'n');
  REQUIRE(SendFrame(fd.get(), Frame(FrameType::kHello, nonce.size(), 7), nonce.data()).ok());
  FrameHeader h;
  REQUIRE(RecvAll(fd.get(), &h, sizeof h).ok());
  REQUIRE(h.type == FrameType::kChallenge);
  std::string challenge(h.length, '\0');
  REQUIRE(RecvAll(fd.get(), challenge.data(), challenge.size()).ok());
  const std::string proof = "good proof";
  REQUIRE(SendFrame(fd.get(), Frame(FrameType::kProof, proof.size()), proof.data()).ok());
  REQUIRE(RecvAll(fd.get(), &h, sizeof h).ok());
  CHECK(h.type == FrameType::kHello);
  for (int i = 0; i < 100 && port.admitted == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(port.admitted == 1);
}

TEST_CASE("the hello table is bounded and silent hellos end at the timeout", "[hello_acceptor]") {
  Port port;
  Serve(port, 4, 300);
  std::vector<UniqueFd> idle;
  idle.reserve(4);
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(port.address));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past the 30 ms minimum
  UniqueFd newest = Connect(port.address);
  CHECK(ClosedWithin(idle[0].get(), 500));  // the oldest made room
  CHECK_FALSE(ClosedWithin(newest.get(), 100));
  for (int i = 1; i < 4; ++i) CHECK(ClosedWithin(idle[i].get(), 1000));
  CHECK(ClosedWithin(newest.get(), 1000));  // its 300 ms are up
}

TEST_CASE("a first frame that is not HELLO is refused with the reason", "[hello_acceptor]") {
  Port port;
  Serve(port, 4, 2000);
  UniqueFd fd = Connect(port.address);
  const std::string proof = "good proof";
  REQUIRE(SendFrame(fd.get(), Frame(FrameType::kProof, proof.size()), proof.data()).ok());
  FrameHeader h;
  REQUIRE(RecvAll(fd.get(), &h, sizeof h).ok());
  CHECK(h.type == FrameType::kAbort);
  std::string why(h.length, '\0');
  REQUIRE(RecvAll(fd.get(), why.data(), why.size()).ok());
  CHECK(why == "first frame is not HELLO");
  CHECK(port.admitted == 0);
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry::net
