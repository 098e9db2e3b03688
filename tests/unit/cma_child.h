// A child process for the CMA tests: a fork of the test holding a buffer at
// the address the parent's buffer had, its contents changed after the fork
// (so a read that reached the parent instead would show), and a command
// pipe: 'd' dumps the buffer to the parent, 'q' exits. The child only
// reads, writes and exits (async-signal-safe: the test has threads).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/unique_fd.h"

namespace isometry::testing {

class CmaChild {
 public:
  // `buffer` (the parent's) is what the child holds at the same address;
  // the child XORs every byte with 0x5A, then runs `setup` (may be null:
  // setuid, munmap, ...), then reports the address and serves commands.
  CmaChild(std::byte* buffer, size_t bytes, const std::function<void()>& setup = nullptr)
      : buffer_(buffer), bytes_(bytes) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to[1]);
      ::close(from[0]);
      Serve(to[0], from[1], setup);
    }
    ::close(to[0]);
    ::close(from[1]);
    commands_.reset(to[1]);
    replies_.reset(from[0]);
    uint64_t address = 0;
    ReadAll(&address, sizeof(address));
    address_ = address;
  }
  ~CmaChild() {
    if (pid_ > 0 && !reaped_) {
      Kill();
    }
  }
  CmaChild(const CmaChild&) = delete;
  CmaChild& operator=(const CmaChild&) = delete;

  pid_t pid() const { return pid_; }
  uint64_t address() const { return address_; }
  // What the child holds now.
  std::vector<std::byte> Dump() {
    std::vector<std::byte> out(bytes_);
    const char c = 'd';
    if (::write(commands_.get(), &c, 1) != 1) return {};
    ReadAll(out.data(), out.size());
    return out;
  }
  // Makes the child exec /bin/sleep: a new program at the same pid.
  // Returns once the exec has happened (the reply pipe, close-on-exec,
  // reads EOF).
  void Exec() {
    const char c = 'x';
    if (::write(commands_.get(), &c, 1) != 1) return;
    char sink = 0;
    while (::read(replies_.get(), &sink, 1) > 0) {
    }
  }
  // What the child held right after the fork.
  static std::vector<std::byte> Expected(const std::byte* buffer, size_t bytes) {
    std::vector<std::byte> v(buffer, buffer + bytes);
    for (std::byte& b : v) b ^= std::byte{0x5A};
    return v;
  }
  // SIGKILL; `reap` also waits for it (its pid may be reused from then on).
  // Returns once the child is dead: reaped, or (reap false) a zombie, so
  // the caller's next look at it never races the signal's delivery.
  void Kill(bool reap = true) {
    ::kill(pid_, SIGKILL);
    if (reap) {
      Reap();
      return;
    }
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 &&
           errno == EINTR) {
    }
  }
  void Reap() {
    if (reaped_) return;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
  }

 private:
  [[noreturn]] void Serve(int commands, int replies, const std::function<void()>& setup) {
    for (size_t i = 0; i < bytes_; ++i) buffer_[i] ^= std::byte{0x5A};
    if (setup) setup();
    const auto address = reinterpret_cast<uint64_t>(buffer_);
    if (::write(replies, &address, sizeof(address)) != sizeof(address)) ::_exit(1);
    char c = 0;
    while (::read(commands, &c, 1) == 1 && (c == 'd' || c == 'x')) {
      if (c == 'x') {
        ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
        ::_exit(1);
      }
      size_t at = 0;
      while (at < bytes_) {
        const ssize_t n = ::write(replies, buffer_ + at, bytes_ - at);
        if (n <= 0) ::_exit(1);
        at += static_cast<size_t>(n);
      }
    }
    ::_exit(0);
  }
  void ReadAll(void* out, size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::read(replies_.get(), p, n);
      if (got <= 0) return;
      p += got;
      n -= static_cast<size_t>(got);
    }
  }

  std::byte* buffer_;
  size_t bytes_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  uint64_t address_ = 0;
  UniqueFd commands_, replies_;
};

}  // namespace isometry::testing
