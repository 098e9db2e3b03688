// Integration tests against real isometryd processes.
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

std::unique_ptr<Client> Connect(const Daemon& d, const std::string& name = "test") {
  return ConnectTo(d.local_socket(), name);
}

// Starts tests' client_worker (a separate program, so no fork of this
// multi-threaded process) with `args`; its stdout goes to `stdout_fd` if set.
pid_t SpawnWorker(const std::vector<std::string>& args, int stdout_fd = -1) {
  const char* bin = std::getenv("ISOMETRY_CLIENT_WORKER");
  if (!bin) throw std::runtime_error("ISOMETRY_CLIENT_WORKER is not set (ctest sets it)");
  std::vector<char*> argv{const_cast<char*>(bin)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start client_worker");
  return pid;
}

// A client connecting now copies an AOS instance into SOA, verified.
void CheckNewClientServed(const Daemon& d) {
  auto c = Connect(d);
  const InstanceShape small{Box::FromExtents({1000}), FieldSpace::Uniform(3, 4), Layout::Aos(1)};
  Placed s = Place(*c, small, 3);
  Placed t = Place(*c, {small.bounds, small.fields, Layout::Soa(1)}, 4);
  REQUIRE(c->Copy(s.inst, t.inst).status.ok());
  CHECK(CheckCopy(s.shape, s.before, t.shape, Bytes(t.alloc, t.shape.total_bytes()), t.before,
                  small.bounds) == "");
}

}  // namespace

TEST_CASE("a C++ client round-trips data byte-exactly with a layout change") {
  Daemon d(kOneMemory);
  auto c = Connect(d);
  const FieldSpace fs = *FieldSpace::Make({{"pos", 12}, {"id", 8}, {"flag", 1}});
  const Box space = Box::FromExtents({123, 77});
  Placed src = Place(*c, {space, fs, Layout::Aos(2)}, 1);
  Placed dst = Place(*c, {space, fs, *Layout::Blocked({8, 5})}, 2);
  client::Completion done = c->Copy(src.inst, dst.inst);
  REQUIRE(done.status.ok());
  CHECK(done.transfer > 0);
  CHECK(CheckCopy(src.shape, Bytes(src.alloc, src.shape.total_bytes()), dst.shape,
                  Bytes(dst.alloc, dst.shape.total_bytes()), dst.before, space) == "");
  // And back, into a third layout, on the copy path again.
  Placed back = Place(*c, {space, fs, Layout::Soa(2)}, 3);
  REQUIRE(c->Copy(dst.inst, back.inst).status.ok());
  CHECK(CheckCopy(src.shape, Bytes(src.alloc, src.shape.total_bytes()), back.shape,
                  Bytes(back.alloc, back.shape.total_bytes()), back.before, space) == "");
  CHECK(d.Stop() == 0);
}

// Issue #21: pages of a fresh allocation were faulted in inside the first
// copy (the daemon's) and the client's first pass (its own mapping).
TEST_CASE("a client's allocation is populated: mapped in full before its first use") {
  Daemon d(kOneMemory);
  auto c = Connect(d);
  const uint64_t bytes = (16ull << 20) + 100;
  client::Allocation a = *c->Allocate("sys0", bytes);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  CHECK(MappedRss(a.data()) == (bytes + page - 1) / page * page);
  // And a published one mapped by another client.
  REQUIRE(a.Publish().ok());
  auto other = Connect(d, "other");
  client::Allocation view = *other->Map(a.id());
  CHECK(MappedRss(view.data()) == (bytes + page - 1) / page * page);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a published allocation is a client-to-client path; others cannot touch private ones") {
  Daemon d(kOneMemory);
  auto a = Connect(d, "producer");
  auto b = Connect(d, "consumer");
  const InstanceShape shape{Box::FromExtents({1 << 16}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Placed src = Place(*a, shape, 5);
  REQUIRE(src.alloc.Publish().ok());
  auto mapped = b->Map(src.alloc.id());
  REQUIRE(mapped.ok());
  CHECK(std::memcmp(mapped->data(), src.before.data(), src.before.size()) == 0);
  auto b_src = b->Register(*mapped, 0, shape);
  REQUIRE(b_src.ok());
  const InstanceShape soa{shape.bounds, shape.fields, Layout::Soa(1)};
  Placed dst = Place(*b, soa, 6);
  REQUIRE(b->Copy(*b_src, dst.inst).status.ok());
  CHECK(CheckCopy(shape, src.before, soa, Bytes(dst.alloc, soa.total_bytes()), dst.before,
                  shape.bounds) == "");
  // A private allocation of b is not reachable from a.
  auto denied = a->Map(dst.alloc.id());
  REQUIRE(!denied.ok());
  CHECK(absl::IsPermissionDenied(denied.status()));
  // Nor can a register an instance on it.
  auto reg = a->Register(dst.alloc, 0, soa);
  CHECK(absl::IsPermissionDenied(reg.status()));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a C++ client over its uid's connection bound hears why, and others are served") {
  // The test's uid may hold two local connections; the third is refused
  // with the reason, not a broken pipe or a tag mismatch.
  Daemon d(std::string("max_connections_per_uid = 2\n") + kOneMemory);
  // The fixture's readiness probe (a connect and close) holds a slot until
  // the daemon's thread for it sees the close; under load that can take a
  // moment, so the two allowed connections may need a retry.
  auto connect_when_room = [&](const std::string& name) {
    for (int i = 0; i < 300; ++i) {
      auto c = Client::Connect({.local_socket = d.local_socket(), .name = name});
      if (c.ok()) return *std::move(c);
      REQUIRE(absl::IsResourceExhausted(c.status()));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("no room for '" << name << "' within 3 s");
    return std::unique_ptr<Client>();
  };
  auto a = connect_when_room("first");
  auto b = connect_when_room("second");
  auto refused = Client::Connect({.local_socket = d.local_socket(), .name = "third"});
  REQUIRE(!refused.ok());
  CHECK(absl::IsResourceExhausted(refused.status()));
  CHECK(refused.status().message().find("max_connections_per_uid") != std::string::npos);
  // The two attached keep working; one leaving makes room.
  const InstanceShape shape{Box::FromExtents({1024}), FieldSpace::Uniform(1, 4), Layout::Aos(1)};
  Placed src = Place(*a, shape, 1), dst = Place(*a, shape, 2);
  REQUIRE(a->Copy(src.inst, dst.inst).status.ok());
  b.reset();
  auto c = connect_when_room("third");
  CHECK(c != nullptr);
  CHECK(d.Stop() == 0);
}

TEST_CASE("16 concurrent client processes x 64 transfers, all verified") {
  Daemon d(kOneMemory);
  std::vector<pid_t> children;
  children.reserve(16);
  for (int k = 0; k < 16; ++k) {
    children.push_back(SpawnWorker({d.local_socket(), "transfers", std::to_string(k)}));
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  CHECK(failed == 0);
  // Every client's session ends and frees its allocations (once the daemon
  // has read each socket's close).
  CHECK(d.SettlesEmpty("sys0"));
  const v1::StatusResponse st = d.Status();
  CHECK(st.transfers_completed() >= uint64_t{16} * 64);
  CHECK(st.sessions() == 0);
  CHECK(d.PoolUsed("sys0") == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client killed with SIGKILL mid-transfer: cancelled, memory freed, others unharmed") {
  // A slow channel keeps the victim's copy in flight long enough.
  Daemon d(R"(
[[memory]]
name = "sys0"
pool = "1GiB"
[[channel]]
name = "memcpy0"
rate_limit = "64MiB"
)");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t victim = SpawnWorker({d.local_socket(), "victim"}, ready[1]);
  close(ready[1]);
  char x;
  REQUIRE(read(ready[0], &x, 1) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the copy is under way
  CHECK(d.PoolUsed("sys0") == uint64_t{2} * (64u << 20));
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  // The daemon notices the closed socket, cancels, and frees both buffers
  // once the request in flight drains.
  CHECK(d.SettlesEmpty("sys0"));
  CHECK(d.Status().transfers_cancelled() == 1);
  CHECK(d.Status().sessions() == 0);
  // Everyone else carries on.
  CheckNewClientServed(d);
  CHECK(d.Stop() == 0);
}

namespace {
size_t OpenFds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("300 clients killed with SIGKILL at random points: nothing leaks, others unharmed") {
  Daemon d(kOneMemory);
  REQUIRE(d.SettlesEmpty("sys0"));
  const size_t fds_before = OpenFds(d.pid());
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    // Killed while connecting, allocating, registering or copying.
    const pid_t w = SpawnWorker({d.local_socket(), "transfers", std::to_string(i)});
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    kill(w, SIGKILL);
    waitpid(w, nullptr, 0);
  }
  CHECK(d.SettlesEmpty("sys0"));
  const v1::StatusResponse st = d.Status();
  CHECK(st.allocations() == 0);
  CHECK(st.instances() == 0);
  // Every memfd, eventfd and socket of the dead sessions was closed (a
  // session's end trails its pool's release by a little on a busy machine).
  size_t fds = OpenFds(d.pid());
  for (int i = 0; i < 500 && fds > fds_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fds = OpenFds(d.pid());
  }
  CHECK(fds <= fds_before);
  CheckNewClientServed(d);
  CHECK(d.Stop() == 0);
}

TEST_CASE("thousands of malformed ring entries complete with errors; the daemon stays healthy") {
  Daemon d(kOneMemory);
  auto c = Connect(d, "fuzzer");
  std::mt19937_64 rng(99);
  int errors = 0, oks = 0;
  const int n = 4000;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < n; ++i) {
    ring::SubmissionEntry e{};
    for (size_t b = 0; b < sizeof e; ++b) {
      reinterpret_cast<uint8_t*>(&e)[b] = static_cast<uint8_t>(rng());
    }
    if (i % 4 == 0) {  // well-formed header, unknown instances / transfers
      e = ring::SubmissionEntry{};
      e.op = static_cast<uint16_t>(1 + rng() % 2);
      e.src_instance = rng();
      e.dst_instance = rng();
      e.transfer = rng();
    }
    e.user_data = 1'000'000 + static_cast<uint64_t>(i);
    auto t = c->SubmitRaw(e);
    REQUIRE(t.ok());
    tickets.push_back(*t);
  }
  for (uint64_t t : tickets) {
    const client::Completion done = c->Wait(t);
    (done.status.ok() ? oks : errors) += 1;
    if (!done.status.ok()) REQUIRE(!done.status.message().empty());
  }
  CHECK(errors + oks == n);
  CHECK(errors >= n * 3 / 4);  // only nops and cancels of unknown-but-finished ids may pass
  // A garbage control frame closes only that connection.
  {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", d.local_socket().c_str());
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const char junk[] = "\xff\xff\xff\x7fnot a frame at all";
    (void)!write(fd, junk, sizeof junk);
    char buf[16];
    CHECK(read(fd, buf, sizeof buf) <= 0);  // the daemon hung up on it (EOF or reset)
    close(fd);
  }
  // Healthy: a real copy on the same client still works.
  const InstanceShape shape{Box::FromExtents({4096}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Placed s = Place(*c, shape, 1);
  Placed t = Place(*c, {shape.bounds, shape.fields, Layout::Soa(1)}, 2);
  REQUIRE(c->Copy(s.inst, t.inst).status.ok());
  CHECK(CheckCopy(s.shape, s.before, t.shape, Bytes(t.alloc, t.shape.total_bytes()), t.before,
                  shape.bounds) == "");
  CHECK(d.Status().sessions() == 1);
  CHECK(d.Stop() == 0);
}

namespace {

// The i-th of eight kinds of malformed gRPC request, random where it can
// be; `session` is a valid session for the calls that need one.
grpc::Status SendMalformed(v1::Isometry::Stub& stub, int i, std::mt19937_64& rng,
                           const std::string& session) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("isometry-session", session);
  switch (i % 8) {
    case 0: {  // bad layout text
      v1::RegisterInstanceRequest r;
      r.mutable_spec()->set_layout("F,x,q" + std::to_string(rng() % 10));
      r.mutable_spec()->mutable_bounds()->add_lo(0);
      r.mutable_spec()->mutable_bounds()->add_hi(10);
      r.mutable_spec()->add_fields()->set_size(4);
      v1::RegisterInstanceResponse out;
      return stub.RegisterInstance(&ctx, r, &out);
    }
    case 1: {  // box with mismatched or too many dims, overflowing extents
      v1::RegisterInstanceRequest r;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) {
        r.mutable_spec()->mutable_bounds()->add_lo(static_cast<int64_t>(rng()));
        r.mutable_spec()->mutable_bounds()->add_hi(static_cast<int64_t>(rng()));
      }
      r.mutable_spec()->set_layout("F,x");
      v1::RegisterInstanceResponse out;
      return stub.RegisterInstance(&ctx, r, &out);
    }
    case 2: {  // huge or zero allocation
      v1::AllocateRequest r;
      r.set_memory(i % 16 == 2 ? "nope" : "sys0");
      r.set_bytes(rng() % 2 ? 0 : (1ull << 62) + rng() % 1000);
      v1::AllocateResponse out;
      return stub.Allocate(&ctx, r, &out);
    }
    case 3: {  // unknown instances
      v1::CopyRequest r;
      r.set_src_instance(rng());
      r.set_dst_instance(rng());
      v1::CopyResponse out;
      return stub.Copy(&ctx, r, &out);
    }
    case 4: {  // reads and writes outside any allocation
      v1::ReadRequest r;
      r.set_allocation(rng() % 4);
      r.set_offset(rng());
      r.set_length(rng());
      v1::ReadResponse out;
      return stub.Read(&ctx, r, &out);
    }
    case 5: {  // no session at all
      grpc::ClientContext bare;
      v1::AllocateRequest r;
      r.set_memory("sys0");
      r.set_bytes(4096);
      v1::AllocateResponse out;
      return stub.Allocate(&bare, r, &out);
    }
    case 6: {  // bad plan requests
      v1::ExplainPlanRequest r;
      r.set_src_memory("sys0");
      r.set_dst_memory(rng() % 2 ? "sys0" : "mars");
      r.set_src_layout("F");
      r.set_dst_layout("x,F");
      r.mutable_bounds()->add_lo(0);
      r.mutable_bounds()->add_hi(-5);
      v1::ExplainPlanResponse out;
      return stub.ExplainPlan(&ctx, r, &out);
    }
    default: {  // cancel / wait unknown transfers, free unknown allocations
      v1::FreeRequest r;
      r.set_allocation(rng());
      v1::FreeResponse out;
      return stub.Free(&ctx, r, &out);
    }
  }
}

}  // namespace

TEST_CASE("thousands of malformed gRPC requests get clear errors; nothing changes") {
  Daemon d(kOneMemory);
  v1::Isometry::Stub& stub = d.stub();
  // A session for the requests that need one.
  grpc::ClientContext attach_ctx;
  v1::AttachRequest areq;
  areq.set_client_name("fuzzer");
  auto stream = stub.Attach(&attach_ctx, areq);
  v1::SessionEvent first;
  REQUIRE(stream->Read(&first));
  const std::string session = first.session();
  REQUIRE(!session.empty());

  std::mt19937_64 rng(7);
  int rejected = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const grpc::Status s = SendMalformed(stub, i, rng, session);
    if (!s.ok()) {
      ++rejected;
      REQUIRE(!s.error_message().empty());
    }
  }
  CHECK(rejected == n);
  const v1::StatusResponse st = d.Status();
  CHECK(st.allocations() == 0);
  CHECK(st.instances() == 0);
  CHECK(st.transfers_submitted() == 0);
  attach_ctx.TryCancel();
  CHECK(d.Stop() == 0);
}

TEST_CASE("SIGTERM lets in-flight transfers finish and exits 0") {
  Daemon d(R"(
[[memory]]
name = "sys0"
pool = "1GiB"
[[channel]]
name = "memcpy0"
rate_limit = "256MiB"
)");
  auto c = Connect(d);
  const InstanceShape shape{Box::FromExtents({4 << 20}), FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  Placed s = Place(*c, shape, 1);
  Placed t = Place(*c, shape, 2);
  auto ticket = c->Submit(s.inst, t.inst);
  REQUIRE(ticket.ok());
  // The submission is in flight once the daemon lists it as active (a busy
  // machine may take longer than any fixed sleep to read the ring; a copy
  // submitted after SIGTERM is refused, which is not what this tests).
  bool active = false;
  for (int i = 0; i < 500 && !active; ++i) {
    active = d.Status().transfers_active() > 0;
    if (!active) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(active);
  std::atomic<int> code{-2};
  std::thread stopper([&] { code = d.Stop(); });
  const client::Completion done = c->Wait(*ticket);
  INFO(done.status.ToString());
  CHECK(done.status.ok());  // 32 MiB at 256 MiB/s fits the 2 s grace
  CHECK(std::memcmp(t.alloc.data(), s.before.data(), s.before.size()) == 0);
  c.reset();
  stopper.join();
  CHECK(code == 0);
}

TEST_CASE("calibration at start is kept in the state directory; plans carry predictions") {
  Daemon d(kOneMemory, /*calibrate=*/true);
  CHECK(std::filesystem::exists(d.dir() + "/state/calibration.toml"));
  // ExplainPlan: the planner's choice with the model's figures.
  grpc::ClientContext ectx;
  v1::ExplainPlanRequest er;
  er.set_src_memory("sys0");
  er.set_dst_memory("sys0");
  er.set_src_layout("F,y,x");
  er.set_dst_layout("y,x,F");
  er.mutable_bounds()->add_lo(0);
  er.mutable_bounds()->add_hi(4096);
  er.mutable_bounds()->add_lo(0);
  er.mutable_bounds()->add_hi(1024);
  v1::Field* f = er.add_fields();
  f->set_name("v");
  f->set_size(8);
  v1::ExplainPlanResponse plan;
  const grpc::Status explained = d.stub().ExplainPlan(&ectx, er, &plan);
  INFO(explained.error_message());
  REQUIRE(explained.ok());
  CHECK(plan.algorithm() == "full");  // 32 MiB >= the 16 MiB threshold
  REQUIRE(plan.hops_size() == 1);
  CHECK(plan.hops(0).channel() == "memcpy0");
  // The prediction's shape, not a speed (that is the benchmark's business,
  // and a busy machine measures any figure): a calibrated, finite, positive
  // rate, which for a one-hop path is that hop's.
  CHECK(std::isfinite(plan.predicted_bytes_per_s()));
  CHECK(plan.predicted_bytes_per_s() > 0);
  CHECK(plan.predicted_bytes_per_s() == Approx(plan.hops(0).predicted_bytes_per_s()));
  CHECK(plan.chunks() == 8);  // 32 MiB in 4 MiB requests
  CHECK(plan.chunks() * plan.chunk_bytes() == 32ull << 20);
  // Re-measuring on request: an operator action.
  v1::CalibrateResponse cal;
  {
    grpc::ClientContext anyone;
    const grpc::Status refused = d.stub().Calibrate(&anyone, v1::CalibrateRequest(), &cal);
    CHECK(refused.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(refused.error_message().find("operator") != std::string::npos);
  }
  std::string token;
  std::ifstream(d.dir() + "/state/operator.token") >> token;
  REQUIRE(!token.empty());
  grpc::ClientContext cctx;
  cctx.AddMetadata("isometry-operator", token);
  REQUIRE(d.stub().Calibrate(&cctx, v1::CalibrateRequest(), &cal).ok());
  // The node's parallel copy rate and its pipelined pair with cached and
  // with streaming ring writes (one sample each), then the channel's
  // curves: conversions by run, plain copies by size, and conversions of 8
  // fields by run.
  REQUIRE(cal.channels_size() == 6);
  CHECK(cal.channels(0).channel() == ":node_copy");
  CHECK(cal.channels(0).samples_size() == 1);
  CHECK(cal.channels(1).channel() == ":node_pipe");
  CHECK(cal.channels(1).samples_size() == 1);
  CHECK(cal.channels(2).channel() == ":node_pipe_streamed");
  CHECK(cal.channels(2).samples_size() == 1);
  CHECK(cal.channels(3).channel() == "memcpy0");
  CHECK(cal.channels(4).channel() == "memcpy0:contiguous");
  CHECK(cal.channels(5).channel() == "memcpy0:fields8");
  // Runs of 1 .. 64 B by doubling, then 512 B .. 64 MiB by eights.
  REQUIRE(cal.channels(3).samples_size() == 14);
  CHECK(cal.channels(3).samples(0).request_bytes() == 1);
  REQUIRE(cal.channels(4).samples_size() == 8);  // 4 KiB .. 64 MiB by fours
  CHECK(cal.channels(4).samples(0).request_bytes() == 4096);
  REQUIRE(cal.channels(5).samples_size() == 7);  // 1 .. 64 B
  for (const v1::ChannelCalibration& ch : cal.channels()) {
    for (const auto& s : ch.samples()) {
      CHECK(std::isfinite(s.bytes_per_s()));
      CHECK(s.bytes_per_s() > 0);
    }
  }
  CHECK(d.Status().plans_full() == 0);  // a fresh planner after calibration
  CHECK(d.Stop() == 0);
}

TEST_CASE("a finished transfer carries the plan's predicted and its measured throughput") {
  Daemon d(kOneMemory);
  auto c = Connect(d);
  const InstanceShape aos{Box::FromExtents({1 << 16}), FieldSpace::Uniform(8, 4), Layout::Aos(1)};
  InstanceShape soa = aos;
  soa.layout = Layout::Soa(1);
  Placed src = Place(*c, aos, 1);
  Placed dst = Place(*c, soa, 2);
  const client::Completion done = c->Copy(src.inst, dst.inst);
  REQUIRE(done.status.ok());
  std::string token;
  std::ifstream(d.dir() + "/state/operator.token") >> token;
  grpc::ClientContext ctx;
  ctx.AddMetadata("isometry-operator", token);
  v1::GetTransferRequest req;
  req.set_transfer(done.transfer);
  v1::TransferInfo info;
  const grpc::Status got = d.stub().GetTransfer(&ctx, req, &info);
  INFO(got.error_message());
  REQUIRE(got.ok());
  CHECK(info.state() == "done");
  // Figures, not speeds: both there, finite and positive; the measured one
  // is the bytes over the elapsed time the record reports.
  CHECK(std::isfinite(info.predicted_bytes_per_s()));
  CHECK(info.predicted_bytes_per_s() > 0);
  CHECK(std::isfinite(info.measured_bytes_per_s()));
  CHECK(info.measured_bytes_per_s() > 0);
  CHECK(info.measured_bytes_per_s() ==
        Approx(static_cast<double>(info.bytes()) / info.elapsed_s()).epsilon(1e-9));
  CHECK(d.Stop() == 0);
}

TEST_CASE("clients copy to and from files of a DSK memory through the daemon") {
  char tmpl[] = "/var/tmp/isometry-dsk-daemon-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  Daemon d(std::string(kOneMemory) + "[[memory]]\nname = \"dsk0\"\nkind = \"DSK\"\ndirectory = \"" +
           dir + "\"\n[[channel]]\nname = \"disk_read0\"\nkind = \"disk_read\"\n" +
           "[[channel]]\nname = \"disk_write0\"\nkind = \"disk_write\"\n");
  auto c = Connect(d);
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 2}});
  const InstanceShape aos{Box::FromExtents({200000}), fs, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fs, Layout::Soa(1)};
  Placed src = Place(*c, aos, 1);
  auto file = c->RegisterFile("dsk0", "run/out.bin", 0, soa);
  REQUIRE(file.ok());  // registering names the file; copies open it
  std::filesystem::create_directories(dir + "/run");
  REQUIRE(c->Copy(src.inst, *file).status.ok());
  CHECK(std::filesystem::file_size(dir + "/run/out.bin") == soa.total_bytes());
  Placed back = Place(*c, aos, 2);
  REQUIRE(c->Copy(*file, back.inst).status.ok());
  CHECK(std::memcmp(back.alloc.data(), src.before.data(), src.before.size()) == 0);
  // Without the sync (ring::kFlagNoSync) the file is whole all the same.
  auto unsynced = c->RegisterFile("dsk0", "run/unsynced.bin", 0, soa);
  REQUIRE(unsynced.ok());
  REQUIRE(c->Copy(src.inst, *unsynced, CopyOptions{.durable = false}).status.ok());
  Placed again = Place(*c, aos, 3);
  REQUIRE(c->Copy(*unsynced, again.inst).status.ok());
  CHECK(std::memcmp(again.alloc.data(), src.before.data(), src.before.size()) == 0);
  // Escapes are refused when the instance is registered.
  for (const char* bad : {"../x.bin", "/etc/passwd", "a/../../x"}) {
    auto r = c->RegisterFile("dsk0", bad, 0, soa);
    CHECK(absl::IsPermissionDenied(r.status()));
  }
  CHECK(absl::IsInvalidArgument(c->RegisterFile("sys0", "x.bin", 0, soa).status()));
  // A missing file fails its copy with the path; the daemon carries on.
  auto missing = c->RegisterFile("dsk0", "nope.bin", 0, soa);
  REQUIRE(missing.ok());
  const client::Completion m = c->Copy(*missing, back.inst);
  CHECK(absl::IsNotFound(m.status));
  CHECK_THAT(std::string(m.status.message()), Catch::Contains("nope.bin"));
  CHECK(d.Stop() == 0);
  std::filesystem::remove_all(dir);
}

}  // namespace ISOMETRY_TEST_FILE
