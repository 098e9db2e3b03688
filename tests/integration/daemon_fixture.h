// Starts a real isometryd (binary from $ISOMETRYD) with its own sockets and
// state directory, and stops it with SIGTERM, checking it exits 0.
#pragma once

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "isometry.grpc.pb.h"

extern char** environ;

namespace isometry::testing {

class Daemon {
 public:
  // `extra` is appended to the generated config (memories, channels).
  explicit Daemon(const std::string& extra_toml) {
    const char* bin = std::getenv("ISOMETRYD");
    if (!bin) throw std::runtime_error("ISOMETRYD is not set (ctest sets it)");
    char tmpl[] = "/tmp/isometry-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    local_ = dir_ + "/local.sock";
    grpc_ = dir_ + "/grpc.sock";
    const std::string config = dir_ + "/isometryd.toml";
    std::ofstream(config) << "[daemon]\nlocal_socket = \"" << local_ << "\"\ngrpc_socket = \"" << grpc_
                          << "\"\nstate_dir = \"" << dir_ << "/state\"\nlog_level = \"warn\"\n"
                          << "shutdown_grace_ms = 2000\n"
                          << extra_toml;
    std::string log = dir_ + "/isometryd.log";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::string arg_c = "-c";
    char* argv[] = {const_cast<char*>(bin), arg_c.data(), const_cast<char*>(config.c_str()), nullptr};
    if (posix_spawn(&pid_, bin, &fa, nullptr, argv, environ) != 0) {
      throw std::runtime_error("cannot spawn isometryd");
    }
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 500 && !Ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!Ready()) throw std::runtime_error("isometryd did not come up; see " + log);
    channel_ = grpc::CreateChannel("unix:" + grpc_, grpc::InsecureChannelCredentials());
    stub_ = v1::Isometry::NewStub(channel_);
  }

  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // SIGTERM; returns the exit status (0 expected) or -1 if it did not exit.
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  bool Alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  const std::string& local_socket() const { return local_; }
  const std::string& grpc_socket() const { return grpc_; }
  v1::Isometry::Stub& stub() { return *stub_; }

  v1::StatusResponse Status() {
    grpc::ClientContext ctx;
    v1::StatusResponse resp;
    grpc::Status s = stub_->GetStatus(&ctx, v1::StatusRequest(), &resp);
    if (!s.ok()) throw std::runtime_error("GetStatus: " + s.error_message());
    return resp;
  }

  uint64_t PoolUsed(const std::string& memory) {
    grpc::ClientContext ctx;
    v1::ListMemoriesResponse resp;
    stub_->ListMemories(&ctx, v1::ListMemoriesRequest(), &resp);
    for (const auto& m : resp.memories())
      if (m.name() == memory) return m.pool_used();
    return ~0ull;
  }

 private:
  bool Ready() const {
    if (!std::filesystem::exists(grpc_)) return false;
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", local_.c_str());
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    return ok;
  }

  std::string dir_, local_, grpc_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Isometry::Stub> stub_;
};

inline constexpr char kOneMemory[] = R"(
[[memory]]
name = "sys0"
pool = "1GiB"
client_quota = "512MiB"
[[channel]]
name = "memcpy0"
)";

}  // namespace isometry::testing
