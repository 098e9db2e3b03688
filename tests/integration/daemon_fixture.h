// A real isometryd (binary from $ISOMETRYD) with its own sockets and state
// directory, plus a gRPC stub for checking its state from outside.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "isometry.grpc.pb.h"
#include "tools/common/daemon_process.h"

namespace isometry::testing {

class Daemon {
 public:
  explicit Daemon(const std::string& extra_toml, bool calibrate = false)
      : process_(StartOrThrow(extra_toml, calibrate)) {
    channel_ =
        grpc::CreateChannel("unix:" + process_.grpc_socket(), grpc::InsecureChannelCredentials());
    stub_ = v1::Isometry::NewStub(channel_);
  }

  int Stop() { return process_.Stop(); }
  const std::string& local_socket() const { return process_.local_socket(); }
  const std::string& grpc_socket() const { return process_.grpc_socket(); }
  const std::string& dir() const { return process_.dir(); }
  pid_t pid() const { return process_.pid(); }
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
    for (const auto& m : resp.memories()) {
      if (m.name() == memory) return m.pool_used();
    }
    return ~0ull;
  }

  // True once no session is left, no transfer is active and memory's pool
  // is empty, polled for up to 3 s: a session ends when the daemon reads
  // its client's socket close, which trails the client's exit.
  bool SettlesEmpty(const std::string& memory) {
    for (int i = 0; i < 300; ++i) {
      const v1::StatusResponse st = Status();
      if (st.sessions() == 0 && st.transfers_active() == 0 && PoolUsed(memory) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  static tools::DaemonProcess StartOrThrow(const std::string& extra_toml, bool calibrate) {
    const char* bin = std::getenv("ISOMETRYD");
    if (!bin) throw std::runtime_error("ISOMETRYD is not set (ctest sets it)");
    auto d = tools::DaemonProcess::Start(bin, extra_toml, "warn", calibrate);
    if (!d.ok()) throw std::runtime_error(d.status().ToString());
    return *std::move(d);
  }

  tools::DaemonProcess process_;
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
