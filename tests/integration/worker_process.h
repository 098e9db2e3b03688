// A private_worker process (tests/integration/private_worker.cc) driven
// from a test: it registers and publishes a patterned private range of its
// own memory; the test reads its range id, dumps its memory, kills it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "integration/daemon_fixture.h"
#include "tools/common/piped_child.h"
#include "unit/test_util.h"

namespace isometry::testing {

// A private_worker process: its range id, its commands, its end.
class Worker {
 public:
  Worker(const Daemon& d, uint64_t bytes, uint64_t seed, long uid = -1, uint64_t hole = 0)
      : bytes_(bytes), seed_(seed) {
    const char* bin = std::getenv("ISOMETRY_PRIVATE_WORKER");
    if (!bin) throw std::runtime_error("ISOMETRY_PRIVATE_WORKER is not set (ctest sets it)");
    auto child =
        tools::SpawnPiped({bin, d.local_socket(), std::to_string(bytes), std::to_string(seed),
                           std::to_string(uid), std::to_string(hole)});
    if (!child.ok()) throw std::runtime_error(child.status().ToString());
    pid_ = child->pid;
    to_ = fdopen(child->to, "w");
    from_ = fdopen(child->from, "r");
    range_ = std::stoull(ReadLine());
  }
  ~Worker() {
    if (pid_ > 0) {
      std::fputs("exit\n", to_);
      std::fflush(to_);
      Reap();
    }
    std::fclose(to_);
    std::fclose(from_);
  }

  uint64_t range() const { return range_; }
  pid_t pid() const { return pid_; }
  std::vector<std::byte> before() const { return Pattern(bytes_, seed_); }

  // Its memory as it is now.
  std::vector<std::byte> Dump(const Daemon& d) {
    // Under /tmp: a worker of another uid cannot write the daemon's directory.
    (void)d;
    const std::string path = "/tmp/isometry-private-dump." + std::to_string(pid_);
    std::fprintf(to_, "dump %s\n", path.c_str());
    std::fflush(to_);
    if (ReadLine() != "dumped") throw std::runtime_error("worker did not dump");
    std::ifstream f(path, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(raw.size());
    std::memcpy(out.data(), raw.data(), raw.size());
    std::remove(path.c_str());
    return out;
  }

  // The pieces it has packed for served reads: {staged, direct}.
  std::pair<uint64_t, uint64_t> PackedPieces() {
    std::fputs("pieces\n", to_);
    std::fflush(to_);
    const std::string line = ReadLine();
    unsigned long long staged = 0, direct = 0;
    if (std::sscanf(line.c_str(), "%llu %llu", &staged, &direct) != 2) {
      throw std::runtime_error("worker did not count its pieces: " + line);
    }
    return {staged, direct};
  }

  // Ends its session (its client goes) while the process and its memory
  // stay.
  void Leave() {
    std::fputs("leave\n", to_);
    std::fflush(to_);
    if (ReadLine() != "left") throw std::runtime_error("worker did not leave");
  }

  void Kill() {
    ::kill(pid_, SIGKILL);
    Reap();
  }

 private:
  std::string ReadLine() {
    char line[256];
    if (!std::fgets(line, sizeof line, from_)) {
      int st = 0;
      waitpid(pid_, &st, 0);
      pid_ = -1;
      throw std::runtime_error("private_worker ended early, status " + std::to_string(st));
    }
    std::string s(line);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void Reap() {
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  uint64_t bytes_, seed_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  uint64_t range_ = 0;
};

}  // namespace isometry::testing
