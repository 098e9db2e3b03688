// How the data connections should do their I/O, measured: the same stream
// of frames over N loopback TCP connections with (a) a blocking reader and
// writer thread per connection (what channels/tcp does), (b) one epoll
// thread per side over non-blocking sockets, (c) one io_uring per side with
// a send or recv in flight per connection. Every frame comes from and goes
// to distinct memory (as a copy's chunks do), 48-byte header then payload.
//
//   net_io_bench [--bytes 1GiB] [--connections 4] [--frame 4MiB] [--json]
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config/config_parser.h"
#include "core/strings.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/stopwatch.h"

namespace {

using isometry::bench::Clock;
using isometry::bench::SecondsSince;
constexpr size_t kHeader = 48;

void Check(bool ok, const char* what) {
  if (!ok) {
    throw std::runtime_error(std::string(what) + ": " + isometry::ErrnoString(errno));
  }
}

// N connected pairs on loopback: senders[i] -> receivers[i].
struct Pairs {
  std::vector<int> senders, receivers;
  explicit Pairs(int n) {
    const int l = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    Check(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "bind");
    Check(::listen(l, n) == 0 && ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0,
          "listen");
    for (int i = 0; i < n; ++i) {
      const int c = ::socket(AF_INET, SOCK_STREAM, 0);
      Check(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connect");
      const int s = ::accept(l, nullptr, nullptr);
      Check(s >= 0, "accept");
      const int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      senders.push_back(c);
      receivers.push_back(s);
    }
    ::close(l);
  }
  ~Pairs() {
    for (int fd : senders) {
      ::close(fd);
    }
    for (int fd : receivers) {
      ::close(fd);
    }
  }
};

struct Plan {
  uint64_t bytes, frame;
  int connections;
  std::byte* src;
  std::byte* dst;
  uint64_t frames() const { return (bytes + frame - 1) / frame; }
  uint64_t length(uint64_t k) const { return std::min(frame, bytes - k * frame); }
};

// Per connection: the frames k = c, c + n, c + 2n, ... and where we are in
// the current one (header, then payload).
struct Cursor {
  uint64_t frame = 0;  // index into this connection's frames
  uint64_t done = 0;   // bytes of the current frame (header included)
  std::byte header[kHeader]{};
};

// (a) threads: blocking send and recv.
void RunThreads(const Plan& p, Pairs& pairs) {
  std::vector<std::thread> threads;
  for (int c = 0; c < p.connections; ++c) {
    threads.emplace_back([&, c] {
      std::byte header[kHeader]{};
      for (uint64_t k = static_cast<uint64_t>(c); k < p.frames(); k += p.connections) {
        iovec iov[2] = {{header, kHeader}, {p.src + k * p.frame, p.length(k)}};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        while (m.msg_iovlen > 0) {
          ssize_t n = ::sendmsg(pairs.senders[static_cast<size_t>(c)], &m, MSG_NOSIGNAL);
          Check(n > 0, "sendmsg");
          while (m.msg_iovlen > 0 && static_cast<size_t>(n) >= m.msg_iov->iov_len) {
            n -= static_cast<ssize_t>(m.msg_iov->iov_len);
            ++m.msg_iov;
            --m.msg_iovlen;
          }
          if (m.msg_iovlen > 0) {
            m.msg_iov->iov_base = static_cast<char*>(m.msg_iov->iov_base) + n;
            m.msg_iov->iov_len -= static_cast<size_t>(n);
          }
        }
      }
    });
    threads.emplace_back([&, c] {
      std::byte header[kHeader];
      for (uint64_t k = static_cast<uint64_t>(c); k < p.frames(); k += p.connections) {
        const int fd = pairs.receivers[static_cast<size_t>(c)];
        Check(::recv(fd, header, kHeader, MSG_WAITALL) == static_cast<ssize_t>(kHeader), "recv");
        uint64_t got = 0;
        while (got < p.length(k)) {
          const ssize_t n = ::recv(fd, p.dst + k * p.frame + got, p.length(k) - got, MSG_WAITALL);
          Check(n > 0, "recv");
          got += static_cast<uint64_t>(n);
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
}

// The next piece of connection c's current frame for a cursor: header or payload.
std::pair<std::byte*, uint64_t> Piece(const Plan& p, int c, Cursor& cur, bool send) {
  const uint64_t k = static_cast<uint64_t>(c) + cur.frame * static_cast<uint64_t>(p.connections);
  if (cur.done < kHeader) {
    return {cur.header + cur.done, kHeader - cur.done};
  }
  std::byte* base = (send ? p.src : p.dst) + k * p.frame;
  return {base + (cur.done - kHeader), p.length(k) - (cur.done - kHeader)};
}
bool Advance(const Plan& p, int c, Cursor& cur, uint64_t n) {
  const uint64_t k = static_cast<uint64_t>(c) + cur.frame * static_cast<uint64_t>(p.connections);
  cur.done += n;
  if (cur.done == kHeader + p.length(k)) {
    cur.done = 0;
    ++cur.frame;
  }
  return static_cast<uint64_t>(c) + cur.frame * static_cast<uint64_t>(p.connections) >= p.frames();
}

// (b) epoll: one thread per side, non-blocking sockets, level-triggered.
void EpollSide(const Plan& p, const std::vector<int>& fds, bool send) {
  const int ep = ::epoll_create1(0);
  std::vector<Cursor> cur(fds.size());
  int open = 0;
  for (size_t c = 0; c < fds.size(); ++c) {
    if (static_cast<uint64_t>(c) >= p.frames()) {
      continue;
    }
    ::fcntl(fds[c], F_SETFL, O_NONBLOCK);
    epoll_event ev{send ? static_cast<uint32_t>(EPOLLOUT) : static_cast<uint32_t>(EPOLLIN),
                   {.u64 = c}};
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fds[c], &ev);
    ++open;
  }
  epoll_event events[64];
  while (open > 0) {
    const int n = ::epoll_wait(ep, events, 64, -1);
    for (int i = 0; i < n; ++i) {
      const int c = static_cast<int>(events[i].data.u64);
      while (true) {
        auto [ptr, len] = Piece(p, c, cur[static_cast<size_t>(c)], send);
        const ssize_t got = send ? ::send(fds[static_cast<size_t>(c)], ptr, len, MSG_NOSIGNAL)
                                 : ::recv(fds[static_cast<size_t>(c)], ptr, len, 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          break;
        }
        Check(got > 0, send ? "send" : "recv");
        if (Advance(p, c, cur[static_cast<size_t>(c)], static_cast<uint64_t>(got))) {
          ::epoll_ctl(ep, EPOLL_CTL_DEL, fds[static_cast<size_t>(c)], nullptr);
          --open;
          break;
        }
      }
    }
  }
  ::close(ep);
}

void RunEpoll(const Plan& p, Pairs& pairs) {
  std::thread s([&] { EpollSide(p, pairs.senders, true); });
  std::thread r([&] { EpollSide(p, pairs.receivers, false); });
  s.join();
  r.join();
}

// (c) io_uring: one ring per side, one send/recv in flight per connection.
void UringSide(const Plan& p, const std::vector<int>& fds, bool send) {
  io_uring ring;
  Check(io_uring_queue_init(64, &ring, 0) == 0, "io_uring_queue_init");
  std::vector<Cursor> cur(fds.size());
  int open = 0;
  auto submit = [&](int c) {
    auto [ptr, len] = Piece(p, c, cur[static_cast<size_t>(c)], send);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (send) {
      io_uring_prep_send(sqe, fds[static_cast<size_t>(c)], ptr, len, MSG_NOSIGNAL);
    } else {
      io_uring_prep_recv(sqe, fds[static_cast<size_t>(c)], ptr, len, MSG_WAITALL);
    }
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(c));
  };
  for (size_t c = 0; c < fds.size(); ++c) {
    if (static_cast<uint64_t>(c) >= p.frames()) {
      continue;
    }
    submit(static_cast<int>(c));
    ++open;
  }
  io_uring_submit(&ring);
  while (open > 0) {
    io_uring_cqe* cqe;
    Check(io_uring_wait_cqe(&ring, &cqe) == 0, "io_uring_wait_cqe");
    const int c = static_cast<int>(io_uring_cqe_get_data64(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (res <= 0) {
      errno = -res;
      Check(false, send ? "io_uring send" : "io_uring recv");
    }
    if (Advance(p, c, cur[static_cast<size_t>(c)], static_cast<uint64_t>(res))) {
      --open;
    } else {
      submit(c);
      io_uring_submit(&ring);
    }
  }
  io_uring_queue_exit(&ring);
}

void RunUring(const Plan& p, Pairs& pairs) {
  std::thread s([&] { UringSide(p, pairs.senders, true); });
  std::thread r([&] { UringSide(p, pairs.receivers, false); });
  s.join();
  r.join();
}

template <typename Fn>
double Best(const Plan& p, int repeat, Fn run) {
  double best = 0;
  for (int i = 0; i < repeat; ++i) {
    Pairs pairs(p.connections);
    std::memset(p.dst, 0, 4096);
    const auto t0 = Clock::now();
    run(p, pairs);
    const double s = SecondsSince(t0);
    if (std::memcmp(p.src, p.dst, p.bytes) != 0) {
      throw std::runtime_error("data mismatch");
    }
    best = std::max(best, static_cast<double>(p.bytes) / s);
  }
  return best;
}

}  // namespace

// Failures of the runs are caught below; what else could throw here (CLI11's
// option set-up, allocation) is a bug that should terminate loudly.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  CLI::App app{"net_io_bench: blocking threads vs epoll vs io_uring for the data connections"};
  std::string bytes_text = "1GiB", frame_text = "4MiB";
  int connections = 4, repeat = 3;
  bool json = false;
  app.add_option("--bytes", bytes_text, "bytes moved per run");
  app.add_option("--frame", frame_text, "frame (chunk) size");
  app.add_option("--connections", connections, "TCP connections")->check(CLI::Range(1, 64));
  app.add_option("--repeat", repeat, "runs per mode; the best counts")->check(CLI::Range(1, 100));
  app.add_flag("--json", json, "one JSON object per line");
  CLI11_PARSE(app, argc, argv);
  auto bytes = isometry::ParseByteSize(bytes_text);
  auto frame = isometry::ParseByteSize(frame_text);
  if (!bytes.ok() || !frame.ok() || *bytes == 0 || *frame == 0) {
    std::fprintf(stderr, "net_io_bench: --bytes and --frame must be sizes above 0\n");
    return 2;
  }
  auto* src = static_cast<std::byte*>(
      ::mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  auto* dst = static_cast<std::byte*>(
      ::mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (src == MAP_FAILED || dst == MAP_FAILED) {
    return std::perror("mmap"), 1;
  }
  for (uint64_t i = 0; i < *bytes; i += 8) {
    const uint64_t v = i * 0x9e3779b97f4a7c15ull;
    std::memcpy(src + i, &v, std::min<uint64_t>(8, *bytes - i));
  }
  std::memset(dst, 1, *bytes);  // fault the pages in before timing
  const Plan p{*bytes, *frame, connections, src, dst};
  try {
    const double threads = Best(p, repeat, RunThreads);
    const double epoll = Best(p, repeat, RunEpoll);
    const double uring = Best(p, repeat, RunUring);
    isometry::bench::Report report(json);
    const std::string what = std::to_string(connections) + " loopback connections, " + frame_text +
                             " frames, " + bytes_text;
    report.Add({"net_io", "blocking threads, " + what, threads / 1e9, "GB/s", "", 0, 0, ""});
    report.Add({"net_io", "epoll (1 thread per side), " + what, epoll / 1e9, "GB/s",
                "blocking threads", threads / 1e9, epoll / threads, ""});
    report.Add({"net_io", "io_uring (1 ring per side), " + what, uring / 1e9, "GB/s",
                "blocking threads", threads / 1e9, uring / threads, ""});
    report.Finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "net_io_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
