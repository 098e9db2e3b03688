#include "tools/bench/daemon_scenarios.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "isometry.grpc.pb.h"
#include "tools/bench/bench_fail.h"
#include "tools/bench/peers.h"
#include "tools/bench/stopwatch.h"
#include "tools/common/daemon_process.h"

namespace isometry::bench {

namespace {

constexpr char kDaemonConfig[] = R"(
[runtime]
inline_bytes = "64KiB"
[[memory]]
name = "sys0"
pool = "2GiB"
client_quota = "1GiB"
[[channel]]
name = "memcpy0"
threads = 2
)";

// Why rows through the daemon have no prediction: the C++ client library
// has no ExplainPlan call (the RPC exists; the client does not wrap it).

tools::DaemonProcess StartDaemon(const DaemonOptions& o) {
  // Before kDaemonConfig's first table: a key of the [daemon] section
  // DaemonProcess writes first.
  return Must(tools::DaemonProcess::Start(
                  o.isometryd, StrCat("ring_poll_us = ", o.ring_poll_us, "\n", kDaemonConfig)),
              "starting isometryd");
}

InstanceShape Flat(uint64_t bytes) {
  return {Box::FromExtents({static_cast<int64_t>(bytes / 8)}), FieldSpace::Uniform(1, 8),
          Layout::Aos(1)};
}

// One first-copy case: `rounds` paired rounds, each allocating a fresh
// destination, copying into it (first copy), copying again (repeated), then
// freeing it, three times (the round's figures are the medians).
void FirstCopyCase(client::Client& c, const char* scenario, const InstanceShape& src_shape,
                   const InstanceShape& dst_shape, int rounds, Report& report) {
  const uint64_t bytes = src_shape.total_bytes();
  client::Allocation src = Must(c.Allocate("sys0", bytes), "allocate");
  std::memset(src.data(), 0x5a, src.size());
  client::Instance in = Must(c.Register(src, 0, src_shape), "register");
  {  // warm the daemon's channels and plan cache
    client::Allocation dst = Must(c.Allocate("sys0", dst_shape.total_bytes()), "allocate");
    client::Instance out = Must(c.Register(dst, 0, dst_shape), "register");
    if (Status s = c.Copy(in, out).status; !s.ok()) {
      Die(s.ToString());
    }
  }
  Rounds copy, with_allocate;
  std::string detail;
  const double gb = static_cast<double>(bytes) / 1e9;
  const double gib = static_cast<double>(bytes) / static_cast<double>(1ull << 30);
  // Each figure of a round is the median of kPerRound fresh allocations:
  // one 256 MiB copy is short, and single ones swing widely against their
  // pair from one round to the next (docs/benchmarks/README.md, "Method").
  constexpr int kPerRound = 3;
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> first, again, allocated_first, allocate_ms, touch_ms;
    for (int k = 0; k < kPerRound; ++k) {
      const auto t0 = Clock::now();
      client::Allocation dst = Must(c.Allocate("sys0", dst_shape.total_bytes()), "allocate");
      const double allocate_s = SecondsSince(t0);
      client::Instance out = Must(c.Register(dst, 0, dst_shape), "register");
      auto t1 = Clock::now();
      if (Status s = c.Copy(in, out).status; !s.ok()) {
        Die(s.ToString());
      }
      const double first_s = SecondsSince(t1);
      // The client reading its result: one byte per page of its own mapping.
      t1 = Clock::now();
      unsigned sum = 0;
      for (uint64_t off = 0; off < dst.size(); off += 4096) {
        sum += static_cast<unsigned>(*reinterpret_cast<volatile std::byte*>(dst.data() + off));
      }
      const double touch_s = SecondsSince(t1);
      if (sum == 0) {
        Die(std::string(scenario) + ": the copy left the destination empty");
      }
      t1 = Clock::now();
      if (Status s = c.Copy(in, out).status; !s.ok()) {
        Die(s.ToString());
      }
      const double again_s = SecondsSince(t1);
      first.push_back(gb / first_s);
      again.push_back(gb / again_s);
      allocated_first.push_back(gb / (allocate_s + first_s));
      allocate_ms.push_back(allocate_s * 1e3 / gib);
      touch_ms.push_back(touch_s * 1e3 / gib);
    }
    copy.Add(MedianOf(first), MedianOf(again));
    with_allocate.Add(MedianOf(allocated_first), MedianOf(again));
    char buf[96];
    std::snprintf(buf, sizeof buf, " %.1f/%.1f", MedianOf(allocate_ms), MedianOf(touch_ms));
    detail += buf;
  }
  copy.Print(StrCat(scenario, ": first copy vs repeated").c_str());
  std::fprintf(stderr,
               "  %s per round (medians): allocate / client reads the fresh result (ms per "
               "GiB):%s\n",
               scenario, detail.c_str());
  for (Row row : {MedianRow(scenario, "first_copy", copy, "same allocation again", ">= 0.9"),
                  MedianRow(scenario, "allocate+first_copy", with_allocate, "same allocation again",
                            "report")}) {
    row.bytes = bytes;
    row.predicted.note = kNoDaemonPlan;
    report.Add(std::move(row));
  }
}

}  // namespace

void RunFirstCopy(const DaemonOptions& o, Report& report) {
  tools::DaemonProcess daemon = StartDaemon(o);
  auto c = Must(client::Client::Connect({.local_socket = daemon.local_socket(), .name = "first"}),
                "connect");
  const int rounds = o.rounds;
  const FieldSpace fs = FieldSpace::Uniform(8, 4);
  const int64_t entries = 4 << 20;  // x 8 fields x 4 B = 128 MiB
  const InstanceShape aos{Box::FromExtents({entries}), fs, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fs, Layout::Soa(1)};
  FirstCopyCase(*c, "fresh_aos_soa_128MiB", aos, soa, rounds, report);
  const InstanceShape flat = Flat(256ull << 20);
  FirstCopyCase(*c, "fresh_contig_256MiB", flat, flat, rounds, report);
  daemon.Stop();
}

void RunClientToClient(const DaemonOptions& o, Report& report) {
  tools::DaemonProcess daemon = StartDaemon(o);
  using client::Client;
  auto producer = Must(Client::Connect({.local_socket = daemon.local_socket(), .name = "producer"}),
                       "producer connect");
  auto consumer = Must(Client::Connect({.local_socket = daemon.local_socket(), .name = "consumer"}),
                       "consumer connect");
  const InstanceShape shape = Flat(o.client_bytes);
  client::Allocation src = Must(producer->Allocate("sys0", shape.total_bytes()), "allocate");
  std::memset(src.data(), 0x5a, src.size());
  if (Status s = src.Publish(); !s.ok()) {
    Die(s.ToString());
  }
  client::Allocation view = Must(consumer->Map(src.id()), "map");
  client::Allocation dst = Must(consumer->Allocate("sys0", shape.total_bytes()), "allocate");
  std::memset(dst.data(), 0, dst.size());
  client::Instance in = Must(consumer->Register(view, 0, shape), "register");
  client::Instance out = Must(consumer->Register(dst, 0, shape), "register");
  for (int i = 0; i < 3; ++i) {
    consumer->Copy(in, out);  // warm-up
  }
  // One round of ours: client_iterations copies back to back, in GB/s.
  auto ours = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < o.client_iterations; ++i) {
      const client::Completion c = consumer->Copy(in, out);
      if (!c.status.ok()) {
        Die(c.status.ToString());
      }
    }
    const double seconds = SecondsSince(t0);
    return static_cast<double>(o.client_bytes) * o.client_iterations / seconds / 1e9;
  };
  const std::string name = "client_to_client_" + std::to_string(o.client_bytes >> 20) + "MiB";
  struct Peer {
    const char* name;
    std::function<PeerResult()> run;
    Rounds rounds;
    std::string unavailable;
  };
  std::vector<Peer> peers;
  if (o.peers) {
    peers.push_back({"UCX tag_bw UCX_TLS=shm", [&] { return UcxTagBwShm(o.client_bytes); }});
    peers.push_back({"MPICH MPI_Send", [&] {
                       return MpiSendBandwidth(MpiFlavor::kMpich, o.client_bytes, o.source_dir);
                     }});
    peers.push_back({"Open MPI MPI_Send", [&] {
                       return MpiSendBandwidth(MpiFlavor::kOpenMpi, o.client_bytes, o.source_dir);
                     }});
  }
  // Each round: ours, then every peer (the peers run in their own
  // processes while the daemon idles), each paired with this round's ours.
  Rounds alone, vs_best;
  for (int r = 0; r < o.rounds; ++r) {
    const double gbps = ours();
    alone.Add(gbps, gbps);
    double best = 0;
    for (Peer& p : peers) {
      const PeerResult result = p.run();
      if (!result.ok) {
        p.unavailable = result.detail;
        continue;
      }
      p.rounds.Add(gbps, result.bytes_per_s / 1e9);
      best = std::max(best, result.bytes_per_s / 1e9);
    }
    vs_best.Add(gbps, best);
  }
  if (std::memcmp(dst.data(), src.data(), 4096) != 0) {
    Die("client-to-client copy is wrong");
  }
  daemon.Stop();
  auto add = [&](Row row) {
    row.bytes = o.client_bytes;
    row.predicted.note = kNoDaemonPlan;
    report.Add(std::move(row));
  };
  if (!o.peers) {
    add(MedianRow(name.c_str(), "throughput", alone, "(peers skipped)", ""));
    return;
  }
  for (const Peer& p : peers) {
    if (!p.unavailable.empty()) {
      std::fprintf(stderr, "  %s unavailable: %s\n", p.name, p.unavailable.c_str());
    }
    if (!p.rounds.pairs().empty()) {
      p.rounds.Print(StrCat(name, " vs ", p.name).c_str());
      add(MedianRow(name.c_str(), "throughput", p.rounds, p.name, ""));
    }
  }
  add(MedianRow(name.c_str(), "vs_best_peer", vs_best, "the round's best peer", ">= 1.2"));
}

namespace {

// 4 KiB memcpys in this process, in microseconds each: the physical floor.
std::vector<double> MemcpyFloorUs(int iterations) {
  std::vector<std::byte> a(4096, std::byte{1}), b(4096);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    asm volatile("" ::: "memory");
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

// Busy-poll mode: daemon.ring_poll_us and ClientOptions::spin_us at their
// largest, 100 ms.
constexpr uint32_t kBusyPollUs = 100000;
// Copies this far apart outlast the default poll windows (50 us).
constexpr std::chrono::microseconds kSpacedGap{200};

// A daemon keeps its last 4096 finished transfers (Node::Impl::
// kFinishedKept): until it has finished that many, every copy's record is
// new heap memory, faulted in on the ring thread. On a paravirtualized
// guest whose freed pages go back to the host such faults dominate a fresh
// daemon's tail latency (docs/benchmarks/README.md, "Method").
constexpr int kDaemonHistory = 4096;

// 4 KiB copies through the client library's shared-memory rings, waited
// for one at a time, in microseconds each (after 1000 to warm up).
// With `fresh`, the daemon has just started: the warm-up is kDaemonHistory
// copies more, each timed into `fresh`, so that the figures returned are
// of a daemon in its steady state and `fresh` shows its first copies.
// With `gap`, the client waits that long after each copy, so that a daemon
// whose poll window is shorter has gone to sleep when the next copy comes.
std::vector<double> RingLatencyUs(const tools::DaemonProcess& daemon, int iterations,
                                  uint32_t spin_us, std::vector<double>* fresh,
                                  std::chrono::microseconds gap = {}) {
  const InstanceShape shape = Flat(4096);
  auto c = Must(client::Client::Connect(
                    {.local_socket = daemon.local_socket(), .name = "lat", .spin_us = spin_us}),
                "connect");
  client::Allocation sa = Must(c->Allocate("sys0", 4096), "allocate");
  client::Allocation da = Must(c->Allocate("sys0", 4096), "allocate");
  client::Instance si = Must(c->Register(sa, 0, shape), "register");
  client::Instance di = Must(c->Register(da, 0, shape), "register");
  const int warmup = fresh ? 1000 + kDaemonHistory : 1000;
  for (int i = 0; i < warmup; ++i) {
    const auto t0 = Clock::now();
    c->Copy(si, di);
    if (fresh) {
      fresh->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    const client::Completion done = c->Copy(si, di);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!done.status.ok()) {
      Die(done.status.ToString());
    }
    // Spent on the client's core (an application computing between its
    // copies), not asleep: the client's thread stays where it ran.
    for (const auto until = Clock::now() + gap; Clock::now() < until;) {
    }
  }
  return us;
}

// One empty health check (grpc.health.v1.Health/Check for "", which the
// daemon answers from gRPC's own service): what a unary call costs on this
// machine before the daemon does any work, the floor of the Copy row.
// Called through gRPC's generic blocking path with an empty message (the
// encoding of a HealthCheckRequest naming ""), as the generated sync stubs
// do, so both rows pay the same client-side path.
void HealthCheck(grpc::Channel& channel) {
  static const grpc::internal::RpcMethod kCheck("/grpc.health.v1.Health/Check",
                                                grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::ClientContext ctx;
  grpc::Slice empty;  // a message of no bytes (a null ByteBuffer is refused)
  grpc::ByteBuffer request(&empty, 1), response;
  const grpc::Status s = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      &channel, kCheck, &ctx, request, &response);
  if (!s.ok()) {
    Die("gRPC health check: " + s.error_message());
  }
}

struct GrpcSamples {
  std::vector<double> copy_us;   // 4 KiB Copy with wait
  std::vector<double> floor_us;  // the empty health check just before it
};

// 4 KiB unary gRPC Copy calls with wait=true over the daemon's unix socket,
// in microseconds each (after 200 to warm up), each right after an empty
// health check on the same channel.
GrpcSamples GrpcLatencyUs(const tools::DaemonProcess& daemon, int iterations) {
  auto channel =
      grpc::CreateChannel("unix:" + daemon.grpc_socket(), grpc::InsecureChannelCredentials());
  auto stub = v1::Isometry::NewStub(channel);
  grpc::ClientContext attach_ctx;
  v1::AttachRequest areq;
  areq.set_client_name("lat-grpc");
  auto stream = stub->Attach(&attach_ctx, areq);
  v1::SessionEvent first;
  if (!stream->Read(&first)) {
    Die("gRPC attach failed");
  }
  auto call = [&](auto method, const auto& req, auto* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("isometry-session", first.session());
    grpc::Status s = ((*stub).*method)(&ctx, req, resp);
    if (!s.ok()) {
      Die("gRPC: " + s.error_message());
    }
  };
  uint64_t instances[2];
  for (uint64_t& inst : instances) {
    v1::AllocateRequest ar;
    ar.set_memory("sys0");
    ar.set_bytes(4096);
    v1::AllocateResponse alloc;
    call(&v1::Isometry::Stub::Allocate, ar, &alloc);
    v1::RegisterInstanceRequest rr;
    rr.mutable_spec()->set_allocation(alloc.allocation());
    rr.mutable_spec()->mutable_bounds()->add_lo(0);
    rr.mutable_spec()->mutable_bounds()->add_hi(512);
    v1::Field* f = rr.mutable_spec()->add_fields();
    f->set_name("v");
    f->set_size(8);
    rr.mutable_spec()->set_layout("F,x");
    v1::RegisterInstanceResponse reg;
    call(&v1::Isometry::Stub::RegisterInstance, rr, &reg);
    inst = reg.instance();
  }
  v1::CopyRequest cr;
  cr.set_src_instance(instances[0]);
  cr.set_dst_instance(instances[1]);
  cr.set_wait(true);
  GrpcSamples out;
  for (int i = 0; i < iterations + 200; ++i) {
    v1::CopyResponse resp;
    const auto t0 = Clock::now();
    HealthCheck(*channel);
    const auto t1 = Clock::now();
    call(&v1::Isometry::Stub::Copy, cr, &resp);
    if (i >= 200) {
      out.floor_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      out.copy_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t1).count());
    }
    if (resp.info().state() != "done") {
      Die("gRPC copy: " + resp.info().message());
    }
  }
  attach_ctx.TryCancel();
  return out;
}

}  // namespace

namespace {

// The median and p99 of `samples`, which are also appended to `all`.
std::pair<double, double> MedianAndP99(std::vector<double> samples, std::vector<double>& all) {
  all.insert(all.end(), samples.begin(), samples.end());
  std::sort(samples.begin(), samples.end());
  return {PercentileOf(samples, 0.5), PercentileOf(samples, 0.99)};
}

// One latency row pair: per round, the median and p99 against the
// baseline's, and every sample for the percentiles.
struct LatencySeries {
  Rounds median, p99;
  std::vector<double> all;

  // Adds a round's samples against the baseline's (median, p99); returns
  // their (median, p99).
  std::pair<double, double> Add(std::vector<double> samples, std::pair<double, double> base) {
    const auto mine = MedianAndP99(std::move(samples), all);
    median.Add(mine.first, base.first);
    p99.Add(mine.second, base.second);
    return mine;
  }
  void Print(const std::string& what) const {
    median.Print((what + " median (us)").c_str());
    p99.Print((what + " p99 (us)").c_str());
  }
  // The median row (carrying the distribution) and the p99 row.
  void Report(Report& report, const char* scenario, const char* base, const Percentiles& base_pct,
              const char* median_target, const char* p99_target) {
    for (const bool is_median : {true, false}) {
      Row out = MedianRow(scenario, is_median ? "median" : "p99", is_median ? median : p99, base,
                          is_median ? median_target : p99_target, "us");
      out.predicted.note = kLatencyNote;
      out.bytes = 4096;
      if (is_median) {
        out.percentiles = PercentilesOf(std::move(all));
        out.baseline_percentiles = base_pct;
      }
      report.Add(std::move(out));
    }
  }
  static constexpr const char* kLatencyNote = "no plan: a latency row";
};

// The fresh daemon's round-one warm-up (its first 1000 + kDaemonHistory
// copies) against every copy timed after them.
Row FreshDaemonRow(std::vector<double> fresh, std::vector<double> steady) {
  std::sort(fresh.begin(), fresh.end());
  std::sort(steady.begin(), steady.end());
  const double fresh_p99 = PercentileOf(fresh, 0.99), steady_p99 = PercentileOf(steady, 0.99);
  Row out{"latency_4KiB_ring",
          "fresh_daemon_p99",
          fresh_p99,
          "us",
          "p99 once the daemon has finished 4096 copies",
          steady_p99,
          steady_p99 / fresh_p99,
          "report"};
  out.predicted.note = LatencySeries::kLatencyNote;
  out.bytes = 4096;
  return out;
}

}  // namespace

void RunLatency(const DaemonOptions& o, Report& report) {
  tools::DaemonProcess daemon = StartDaemon(o);
  // Busy-poll mode (docs/operations/tuning.md): a daemon and a client that
  // poll for kBusyPollUs after their last work, so that copies with gaps
  // between them still find both awake.
  DaemonOptions busy_options = o;
  busy_options.ring_poll_us = kBusyPollUs;
  tools::DaemonProcess busy_daemon = StartDaemon(busy_options);
  const int spaced_iterations = std::max(100, o.latency_iterations / 10);
  // Per round: the floor, the ring back to back, the spaced copies in both
  // modes, gRPC and UCX once each, in that order.
  LatencySeries ring, spaced, busy, grpc;
  Rounds ring_vs_ucx;
  std::string ucx_unavailable, ucx_command;
  std::vector<double> all_floor, all_grpc_floor, fresh;
  for (int r = 0; r < o.rounds; ++r) {
    const auto floor = MedianAndP99(MemcpyFloorUs(o.latency_iterations), all_floor);
    const auto back_to_back = ring.Add(
        RingLatencyUs(daemon, o.latency_iterations, o.client_spin_us, r == 0 ? &fresh : nullptr),
        floor);
    spaced.Add(RingLatencyUs(daemon, spaced_iterations, o.client_spin_us, nullptr, kSpacedGap),
               floor);
    busy.Add(RingLatencyUs(busy_daemon, spaced_iterations, kBusyPollUs, nullptr, kSpacedGap),
             floor);
    // The busy-poll daemon's ring thread polls on for kBusyPollUs: let it
    // sleep before gRPC is timed.
    std::this_thread::sleep_for(std::chrono::microseconds(2 * kBusyPollUs));
    GrpcSamples g = GrpcLatencyUs(daemon, o.grpc_iterations);
    grpc.Add(std::move(g.copy_us), MedianAndP99(std::move(g.floor_us), all_grpc_floor));
    if (o.peers) {
      // The same 4 KiB between two processes over UCX's shared memory: a
      // ring copy (submit, then its completion) is a round trip, so its
      // pair is twice UCX's one-way latency.
      const PeerLatency ucx = UcxTagLatShm(4096, static_cast<uint64_t>(o.latency_iterations));
      if (ucx.ok) {
        ring_vs_ucx.Add(back_to_back.first, 2 * ucx.median_us);
        ucx_command = ucx.detail;
      } else {
        ucx_unavailable = ucx.detail;
      }
    }
  }
  daemon.Stop();
  busy_daemon.Stop();
  ring.Print("4 KiB ring vs memcpy floor:");
  spaced.Print("4 KiB ring, copies 200 us apart, vs memcpy floor:");
  busy.Print("4 KiB ring, busy-poll, copies 200 us apart, vs memcpy floor:");
  grpc.Print("4 KiB gRPC vs empty gRPC call:");
  if (!ucx_unavailable.empty()) {
    std::fprintf(stderr, "  UCX tag_lat unavailable: %s\n", ucx_unavailable.c_str());
  }
  if (!ring_vs_ucx.pairs().empty()) {
    ring_vs_ucx.Print("4 KiB ring median vs UCX tag_lat round trip (us)");
    std::fprintf(stderr, "  UCX: %s\n", ucx_command.c_str());
  }
  if (!fresh.empty()) report.Add(FreshDaemonRow(std::move(fresh), ring.all));
  const char* const memcpy_floor = "4 KiB memcpy in-process";
  const Percentiles floor_pct = PercentilesOf(std::move(all_floor));
  // Back to back, every copy finds the daemon and the client polling,
  // whatever their windows: the polling (busy-poll) figure. Spaced, the
  // default windows have run out; busy-poll mode's have not.
  ring.Report(report, "latency_4KiB_ring", memcpy_floor, floor_pct, "<= 2 us", "<= 5 us");
  spaced.Report(report, "latency_4KiB_ring_spaced", memcpy_floor, floor_pct, "report", "report");
  busy.Report(report, "latency_4KiB_ring_busy_poll", memcpy_floor, floor_pct, "report", "report");
  if (!ring_vs_ucx.pairs().empty()) {
    Row out = MedianRow("latency_4KiB_ring", "median_vs_ucx", ring_vs_ucx,
                        "UCX tag_lat round trip (2 x one way), UCX_TLS=shm", "report", "us");
    out.predicted.note = LatencySeries::kLatencyNote;
    out.bytes = 4096;
    report.Add(std::move(out));
  }
  grpc.Report(report, "latency_4KiB_grpc", "empty gRPC call (health check)",
              PercentilesOf(std::move(all_grpc_floor)), "<= 100 us", "");
}

}  // namespace isometry::bench
