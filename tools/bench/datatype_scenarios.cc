#include "tools/bench/datatype_scenarios.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "tools/bench/bench_fail.h"
#include "tools/bench/cma_direct.h"
#include "tools/bench/datatype_kernels.h"
#include "tools/bench/pack_pipeline.h"
#include "tools/bench/peers.h"
#include "tools/bench/stopwatch.h"
#include "tools/common/daemon_process.h"
#include "tools/common/piped_child.h"

extern char** environ;

namespace isometry::bench {

namespace {

using client::Elements;
using tools::PipedChild;
using tools::SpawnPiped;

// The peer's range and the benchmark's own: room for the 64 MiB row (the
// kernels' buffers are at most 4 MiB).
constexpr uint64_t kRangeBytes = 64ull << 20;
// The peer's range: a 64 MiB stream of MPI_DOUBLE vector(n, 1, 2) spans 128 MiB.
constexpr uint64_t kPeerBytes = 128ull << 20;

constexpr char kConfig[] = R"(
[[memory]]
name = "sys0"
pool = "64MiB"
client_quota = "64MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)";

// mpi_datatype.c's Pattern: the byte at offset i of the sender's buffer.
uint8_t PatternByte(uint64_t i) { return static_cast<uint8_t>(i * 131 + (i >> 9)); }

std::byte* MapBytes(uint64_t bytes) {
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    Die("mmap of the private buffer failed");
  }
  return static_cast<std::byte*>(m);
}

// The peer process: this binary with kDatatypePeerFlag, spawned (never
// forked: the benchmark process has gRPC's threads).
class Peer {
 public:
  Peer(const std::string& socket, uint64_t bytes) {
    const PipedChild child =
        Must(SpawnPiped({"/proc/self/exe", kDatatypePeerFlag, socket, std::to_string(bytes)}),
             "the datatype peer process");
    pid_ = child.pid;
    to_ = child.to;
    FILE* from = fdopen(child.from, "r");
    unsigned long long range = 0, address = 0;
    const int got = from ? std::fscanf(from, "%llu %llu", &range, &address) : 0;
    if (from) {
      std::fclose(from);
    }
    if (got != 2) {
      Die("the datatype peer process did not publish its range");
    }
    range_ = range;
    address_ = address;
  }
  ~Peer() {
    close(to_);  // the peer ends at end of input
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  pid_t pid() const { return pid_; }
  uint64_t range() const { return range_; }
  uint64_t address() const { return address_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  uint64_t range_ = 0, address_ = 0;
};

// What every row shares: the daemon, the peer, the benchmark's session and
// its own registered (and published) range, and the peer's bytes.
struct Setup {
  explicit Setup(const DatatypeOptions& o)
      : daemon(Must(tools::DaemonProcess::Start(o.isometryd, kConfig), "starting isometryd")),
        peer(std::make_unique<Peer>(daemon.local_socket(), kPeerBytes)),
        c(Must(client::Client::Connect({.local_socket = daemon.local_socket(),
                                        .name = "dtbench",
                                        .run_own_hops = o.own_hops,
                                        .direct_reads = o.direct_reads,
                                        .direct_read_threads = o.direct_read_threads,
                                        .served_reads = o.served_reads}),
               "connect")),
        dst(MapBytes(kRangeBytes)),
        range(Must(c->RegisterPrivate(dst, kRangeBytes), "RegisterPrivate")),
        source(kPeerBytes) {
    if (Status s = range.Publish(); !s.ok()) {
      Die("Publish: " + s.ToString());
    }
    for (uint64_t i = 0; i < source.size(); ++i) {
      source[i] = PatternByte(i);
    }
  }
  ~Setup() { munmap(dst, kRangeBytes); }
  Setup(const Setup&) = delete;
  Setup& operator=(const Setup&) = delete;

  tools::DaemonProcess daemon;
  std::unique_ptr<Peer> peer;
  std::unique_ptr<client::Client> c;
  std::byte* dst;
  client::PrivateRange range;
  std::vector<uint8_t> source;  // the peer's bytes, for the checks
};

void MustCopy(client::Client& c, const client::Instance& s, const client::Instance& d) {
  if (const client::Completion done = c.Copy(s, d); !done.status.ok()) {
    Die("copy: " + done.status.ToString());
  }
}

// Seconds per `once()` over `n` calls back to back, after WarmupFor(n)
// untimed ones (as each MPI run warms up): every timed side of a row.
template <typename F>
double WarmSecondsPer(int n, F&& once) {
  for (uint64_t i = 0; i < WarmupFor(static_cast<uint64_t>(n)); ++i) once();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) once();
  return SecondsSince(t0) / n;
}

// Seconds per copy over `n` copies back to back (WarmSecondsPer).
double TimeCopies(client::Client& c, const client::Instance& s, const client::Instance& d, int n) {
  return WarmSecondsPer(n, [&] { MustCopy(c, s, d); });
}

// Zeroes the destination, runs `copy` once and compares the first
// want.size() bytes with `want`; ends the benchmark with `wrong` when they
// differ: a row (or baseline) that moves wrong bytes does not report.
template <typename F>
void CheckFills(Setup& s, F&& copy, std::span<const uint8_t> want, const std::string& wrong) {
  std::memset(s.dst, 0, want.size());
  copy();
  if (std::memcmp(s.dst, want.data(), want.size()) != 0) {
    Die(wrong);
  }
}

void CopyAndCheck(Setup& s, const client::Instance& src, const client::Instance& dst,
                  std::span<const uint8_t> want, const std::string& row) {
  CheckFills(
      s, [&] { MustCopy(*s.c, src, dst); }, want, row + ": the destination holds wrong bytes");
}

// What the kernel leaves in a zeroed receive buffer: MPI_Unpack of
// MPI_Pack of the peer's bytes.
std::vector<uint8_t> Expected(const Setup& s, const DatatypeKernel& k) {
  std::vector<uint8_t> packed(static_cast<size_t>(k.packed_bytes()));
  std::vector<uint8_t> out(static_cast<size_t>(k.recv.span));
  const std::span<const uint8_t> src(s.source.data(), static_cast<size_t>(k.send.span));
  if (!Pack(src, 0, k.send.type, k.send.count, packed).ok() ||
      !Unpack(packed, k.recv.type, k.recv.count, out, 0).ok()) {
    Die(k.name + ": cannot pack the expected bytes");
  }
  return out;
}

// Copies per round for about `seconds`, from the time of one copy.
int CopiesFor(double seconds, double per_copy) {
  return static_cast<int>(std::clamp(std::round(seconds / per_copy), 1.0, 100000.0));
}

struct Mpi {
  MpiFlavor flavor;
  const char* name;
  double rate = 0;  // bytes/s last seen in this row: sizes the next run
  Rounds rounds;
  std::string unavailable;
};

std::string RowName(const DatatypeKernel& k, int64_t block) {
  if (k.name != "vector") {
    return "dt_" + k.name;
  }
  return block >= (1 << 20)   ? StrCat("dt_vector_", block >> 20, "MiB")
         : block >= (1 << 10) ? StrCat("dt_vector_", block >> 10, "KiB")
                              : StrCat("dt_vector_", block, "B");
}

// One round of every MPI on kernel `k` (each sized from its last rate),
// paired with our `ours` GB/s; the round's best MPI rate (0 when none ran).
double MpiRound(const DatatypeOptions& o, const DatatypeKernel& k, int64_t block, double ours,
                std::vector<Mpi>& mpis) {
  const auto packed = static_cast<double>(k.packed_bytes());
  double best = 0;
  for (Mpi& m : mpis) {
    // An MPI may move some of these types at only tens of MB/s: a row's
    // first round assumes 50 MB/s, so that it cannot run for minutes,
    // later ones the rate just seen.
    const double rate = m.rate > 0 ? m.rate : 5e7;
    const auto iterations = static_cast<uint64_t>(std::clamp(o.seconds * rate / packed, 10.0, 1e5));
    // mpi_datatype.c takes a block argument for every kernel (64 when unused).
    const PeerResult p =
        MpiDatatypeBandwidth(m.flavor, k.name, block > 0 ? block : 64, iterations, o.source_dir);
    if (!p.ok) {
      m.unavailable = p.detail;
      continue;
    }
    m.rate = p.bytes_per_s;
    m.rounds.Add(ours, p.bytes_per_s / 1e9);
    best = std::max(best, p.bytes_per_s / 1e9);
  }
  return best;
}

// One kernel: Isometry from the peer's memory into ours against both MPIs,
// round by round; rows per MPI and against the round's best.
void KernelRow(Setup& s, const DatatypeOptions& o, const DatatypeKernel& k, int64_t block,
               std::vector<Mpi>& mpis, Report& report) {
  const std::string name = RowName(k, block);
  const uint64_t hs = Must(s.c->RegisterDatatype(k.send.type), "RegisterDatatype");
  const uint64_t hd = Must(s.c->RegisterDatatype(k.recv.type), "RegisterDatatype");
  client::Instance src = Must(
      s.c->RegisterPrivateInstance(s.peer->range(), 0, Elements{k.send.type, k.send.count, hs}),
      "register the peer's instance");
  client::Instance dst =
      Must(s.c->Register(s.range, 0, Elements{k.recv.type, k.recv.count, hd}), "register");
  const std::vector<uint8_t> want = Expected(s, k);
  CopyAndCheck(s, src, dst, want, name);
  const CmaDirect cma(s.peer->pid(), s.peer->address(), k.send.type, k.send.count, s.dst,
                      k.recv.type, k.recv.count);
  CheckFills(
      s, [&] { cma.Copy(); }, want, name + ": process_vm_readv of the runs left wrong bytes");
  // Sized from warm copies (TimeCopies warms up first): a size from a cold
  // first copy made rounds of a few hundred copies, whose timing then
  // counted a wake-up of the peer's sleeping thread.
  const int n = CopiesFor(o.seconds, TimeCopies(*s.c, src, dst, 10));
  const int n_cma = CopiesFor(o.seconds, WarmSecondsPer(10, [&] { cma.Copy(); }));
  const PackPipeline pipe(reinterpret_cast<const std::byte*>(s.source.data()), k.send.type,
                          k.send.count, s.dst, k.recv.type, k.recv.count);
  CheckFills(
      s, [&] { pipe.Time(1); }, want, name + ": the pack pipeline left wrong bytes");
  const int n_pipe = CopiesFor(o.seconds, pipe.Time(10));
  const auto packed = static_cast<double>(k.packed_bytes());
  Rounds vs_best, alone, vs_cma, cma_vs_best, vs_pipe, best_vs_pipe;
  for (int r = 0; r < o.rounds; ++r) {
    const double ours = packed / TimeCopies(*s.c, src, dst, n) / 1e9;
    const double zero_copy = packed / WarmSecondsPer(n_cma, [&] { cma.Copy(); }) / 1e9;
    const double pipe_limit = packed / pipe.Time(n_pipe) / 1e9;
    alone.Add(ours, ours);
    vs_cma.Add(ours, zero_copy);
    vs_pipe.Add(ours, pipe_limit);
    const double best = MpiRound(o, k, block, ours, mpis);
    vs_best.Add(ours, best);
    cma_vs_best.Add(zero_copy, best);
    if (best > 0) best_vs_pipe.Add(best, pipe_limit);
  }
  if (std::memcmp(s.dst, want.data(), want.size()) != 0) {
    Die(name + ": the destination holds wrong bytes after the timed copies");
  }
  auto add = [&](Row row) {
    row.bytes = static_cast<uint64_t>(k.packed_bytes());
    row.predicted.note = kNoDaemonPlan;
    report.Add(std::move(row));
  };
  for (Mpi& m : mpis) {
    if (!m.unavailable.empty()) {
      std::fprintf(stderr, "  %s %s unavailable: %s\n", name.c_str(), m.name,
                   m.unavailable.c_str());
      m.unavailable.clear();
    }
    m.rate = 0;
    if (!m.rounds.pairs().empty()) {
      m.rounds.Print(StrCat(name, " vs ", m.name).c_str());
      add(MedianRow(name.c_str(), "throughput", m.rounds, m.name, ""));
    }
    m.rounds = Rounds();
  }
  vs_cma.Print(StrCat(name, " vs process_vm_readv of the runs").c_str());
  add(MedianRow(name.c_str(), "vs_cma_zero_copy", vs_cma, "process_vm_readv, 1 iovec a run",
                "report"));
  if (!cma_vs_best.pairs().empty()) {
    cma_vs_best.Print(StrCat(name, ": process_vm_readv of the runs vs the best MPI").c_str());
    add(MedianRow(name.c_str(), "cma_zero_copy_vs_best_mpi", cma_vs_best, "the round's best MPI",
                  "report"));
  }
  const char* pipe_name = pipe.pinned() ? "pack pipeline, 2 threads" : "pack pipeline, 1 CPU";
  vs_pipe.Print(StrCat(name, " vs the machine's pack pipeline").c_str());
  add(MedianRow(name.c_str(), "vs_pack_pipeline", vs_pipe, pipe_name, "report"));
  if (!best_vs_pipe.pairs().empty()) {
    best_vs_pipe.Print(StrCat(name, ": the best MPI vs the machine's pack pipeline").c_str());
    add(MedianRow(name.c_str(), "best_mpi_vs_pack_pipeline", best_vs_pipe, pipe_name, "report"));
  }
  if (vs_best.pairs().empty()) {  // --no-peers, or no MPI ran (said above)
    add(MedianRow(name.c_str(), "throughput", alone,
                  mpis.empty() ? "(MPI skipped)" : "(no MPI ran)", ""));
    return;
  }
  const bool small = k.name == "vector" && block <= 1024;
  add(MedianRow(name.c_str(), "vs_best_mpi", vs_best, "the round's best MPI",
                small ? ">= 1.5" : ">= 1.0"));
}

// Microseconds of `f`.
template <typename F>
double Micros(F&& f) {
  const auto t0 = Clock::now();
  f();
  return SecondsSince(t0) * 1e6;
}

// Memoization. The daemon translates a datatype (walks it into runs)
// when it is registered: once by RegisterDatatype for a handle, or at
// every instance registered by value. Per round, in a fresh session:
// register the kernel's types and both instances by handle (translate),
// copy once; then five times each: both instances by handle, both by
// value, a copy. Rows: translate vs a later registration by handle; by
// value vs by handle (what the memo saves at every later use); the saving
// against a whole later use (registration by handle + copy).
void MemoRow(Setup& s, const DatatypeOptions& o, const DatatypeKernel& k, int64_t block,
             Report& report) {
  const std::string name = "dt_memo_" + RowName(k, block).substr(3);
  Rounds translate, by_value, saved;
  for (int r = 0; r < o.rounds; ++r) {
    auto m =
        Must(client::Client::Connect({.local_socket = s.daemon.local_socket(), .name = "dtmemo"}),
             "connect");
    std::optional<client::Instance> src, dst;
    auto reg = [&](uint64_t hs, uint64_t hd) {
      src.reset();
      dst.reset();
      src = Must(
          m->RegisterPrivateInstance(s.peer->range(), 0, Elements{k.send.type, k.send.count, hs}),
          "register");
      dst =
          Must(m->RegisterPrivateInstance(s.range.id(), 0, Elements{k.recv.type, k.recv.count, hd}),
               "register");
    };
    uint64_t hs = 0, hd = 0;
    const double translate_us = Micros([&] {
      hs = Must(m->RegisterDatatype(k.send.type), "RegisterDatatype");
      hd = Must(m->RegisterDatatype(k.recv.type), "RegisterDatatype");
      reg(hs, hd);
    });
    MustCopy(*m, *src, *dst);
    std::vector<double> handle, value, copy;
    for (int i = 0; i < 5; ++i) {
      handle.push_back(Micros([&] { reg(hs, hd); }));
      copy.push_back(Micros([&] { MustCopy(*m, *src, *dst); }));
      value.push_back(Micros([&] { reg(0, 0); }));
    }
    const double handle_us = MedianOf(handle), value_us = MedianOf(value);
    translate.Add(translate_us, handle_us);
    by_value.Add(value_us, handle_us);
    saved.Add(std::max(value_us - handle_us, 1e-3), handle_us + MedianOf(copy));
  }
  translate.Print(
      StrCat(name, ": translate (types + instances) vs instances by handle (us)").c_str());
  by_value.Print(StrCat(name, ": instances by value vs by handle (us)").c_str());
  saved.Print(StrCat(name, ": saved per use vs a use by handle with its copy (us)").c_str());
  for (Row row :
       {MedianRow(name.c_str(), "translate", translate, "instances by handle", "report", "us"),
        MedianRow(name.c_str(), "by_value", by_value, "instances by handle", "report", "us"),
        MedianRow(name.c_str(), "saved_per_use", saved, "use by handle: register + copy", "report",
                  "us")}) {
    row.bytes = static_cast<uint64_t>(k.packed_bytes());
    row.predicted.note = "no plan: registration time";
    report.Add(std::move(row));
  }
}

// 64 MiB contiguous from the peer's memory into ours against one
// process_vm_readv of one iovec each side, the same copies per round.
void ContiguousRow(Setup& s, const DatatypeOptions& o, Report& report) {
  const char* name = "dt_contig_64MiB";
  const InstanceShape flat{Box::FromExtents({static_cast<int64_t>(kRangeBytes / 8)}),
                           FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  client::Instance src =
      Must(s.c->RegisterPrivateInstance(s.peer->range(), 0, flat), "register the peer's instance");
  client::Instance dst = Must(s.c->Register(s.range, 0, flat), "register");
  const std::span<const uint8_t> want(s.source.data(), kRangeBytes);
  CopyAndCheck(s, src, dst, want, name);
  auto readv = [&] {
    iovec local{s.dst, kRangeBytes};
    // The peer's address, only handed to the kernel.
    iovec remote{reinterpret_cast<void*>(s.peer->address()),  // NOLINT(performance-no-int-to-ptr)
                 kRangeBytes};
    if (process_vm_readv(s.peer->pid(), &local, 1, &remote, 1, 0) !=
        static_cast<ssize_t>(kRangeBytes)) {
      Die("process_vm_readv of the peer failed");
    }
  };
  const int n = CopiesFor(o.seconds, TimeCopies(*s.c, src, dst, 1));
  const double gb = static_cast<double>(kRangeBytes) / 1e9;
  Rounds rounds;
  for (int r = 0; r < o.rounds; ++r) {
    const double ours = gb / TimeCopies(*s.c, src, dst, n);
    rounds.Add(ours, gb / WarmSecondsPer(n, readv));
  }
  CheckFills(s, readv, want, std::string(name) + ": process_vm_readv read wrong bytes");
  rounds.Print(StrCat(name, " vs process_vm_readv").c_str());
  Row row = MedianRow(name, "throughput", rounds, "process_vm_readv, 1 iovec", ">= 0.9");
  row.bytes = kRangeBytes;
  row.predicted.note = kNoDaemonPlan;
  report.Add(std::move(row));
}

// A datatype -> a layout of fields of different sizes (SOA "x,F") against
// the same bytes as a layout -> layout copy (the peer's bytes as AOS
// "F,x"): contiguous bytes -> fields {6, 1, 1}, or MPI_DOUBLE
// vector(n, 1, 2) -> fields {4, 1}, whose stream pairs with the points
// only every 40 bytes.
void MixedFieldsRow(Setup& s, const DatatypeOptions& o, uint64_t bytes, bool strided,
                    Report& report) {
  const std::string name =
      StrCat("dt_", strided ? "vector" : "contig", "_to_mixed_soa_", bytes >> 20, "MiB");
  const std::vector<Field> f = strided ? std::vector<Field>{{"a", 4}, {"b", 1}}
                                       : std::vector<Field>{{"a", 6}, {"b", 1}, {"c", 1}};
  const FieldSpace fields = Must(FieldSpace::Make(f), "fields");
  // Whole 40-byte periods when strided: the vector's count stays whole.
  const auto points = static_cast<int64_t>(strided ? bytes / 40 * 8 : bytes / 8);
  bytes = static_cast<uint64_t>(points) * fields.total_bytes();
  const Box box = Box::FromExtents({points});
  const InstanceShape soa{box, fields, *Layout::Parse("x,F", 1)};
  const InstanceShape aos{box, fields, *Layout::Parse("F,x", 1)};
  const Datatype dbl = Datatype::Basic(BasicType::kDouble);
  const Datatype type =
      strided ? Must(Datatype::Vector(static_cast<int64_t>(bytes / 8), 1, 2, dbl), "vector")
              : Must(Datatype::Contiguous(static_cast<int64_t>(bytes),
                                          Datatype::Basic(BasicType::kByte)),
                     "contiguous");
  const uint64_t span = static_cast<uint64_t>(type.true_extent());
  std::vector<uint8_t> packed(bytes), want(bytes);
  if (!Pack(std::span<const uint8_t>(s.source.data(), span), 0, type, 1, packed).ok()) {
    Die(name + ": cannot pack the expected bytes");
  }
  uint64_t at = 0;
  for (int64_t x = 0; x < points; ++x) {
    for (size_t k = 0; k < f.size(); ++k) {
      std::memcpy(&want[soa.OffsetOf(k, {x})], &packed[at], f[k].size);
      at += f[k].size;
    }
  }
  client::Instance dt = Must(s.c->RegisterPrivateInstance(s.peer->range(), 0, Elements{type, 1, 0}),
                             "register the peer's datatype");
  client::Instance lay =
      Must(s.c->RegisterPrivateInstance(s.peer->range(), 0, aos), "register the peer's layout");
  client::Instance dst = Must(s.c->Register(s.range, 0, soa), "register");
  CopyAndCheck(s, dt, dst, want, name);
  if (!strided) CopyAndCheck(s, lay, dst, want, name + " (layout baseline)");
  const int n = CopiesFor(o.seconds, TimeCopies(*s.c, dt, dst, 1));
  const double gb = static_cast<double>(bytes) / 1e9;
  Rounds rounds;
  for (int r = 0; r < o.rounds; ++r) {
    rounds.Add(gb / TimeCopies(*s.c, dt, dst, n), gb / TimeCopies(*s.c, lay, dst, n));
  }
  rounds.Print(StrCat(name, " vs layout -> layout").c_str());
  Row row =
      MedianRow(name.c_str(), "throughput", rounds, "the same bytes, layout F,x -> x,F", ">= 0.8");
  row.bytes = bytes;
  row.predicted.note = kNoDaemonPlan;
  report.Add(std::move(row));
}

}  // namespace

void RunDatatype(const DatatypeOptions& o, Report& report) {
  const auto wanted = [&](const std::string& name) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
  };
  const std::vector<std::string> known = DatatypeKernelNames();
  for (const std::string& name : o.only) {
    if (name != "vector" && name != "contig" && name != "mixed" &&
        std::find(known.begin(), known.end(), name) == known.end()) {
      Die("--datatype-kernels: no kernel '" + name + "'");
    }
  }
  Setup s(o);
  std::vector<Mpi> mpis;
  if (o.peers) {
    mpis.push_back({MpiFlavor::kMpich, "MPICH MPI_Send"});
    mpis.push_back({MpiFlavor::kOpenMpi, "Open MPI MPI_Send"});
  }
  for (int64_t block : {8, 64, 512, 1024, 4096, 65536, 2 << 20}) {
    if (!wanted("vector")) break;
    KernelRow(s, o, Must(MakeDatatypeKernel("vector", block), "kernel"), block, mpis, report);
  }
  for (const std::string& name : DatatypeKernelNames()) {
    if (wanted(name)) KernelRow(s, o, Must(MakeDatatypeKernel(name), "kernel"), 0, mpis, report);
  }
  if (wanted("vector")) {
    MemoRow(s, o, Must(MakeDatatypeKernel("vector", 1024), "kernel"), 1024, report);
  }
  for (const std::string& name : DatatypeKernelNames()) {
    if (wanted(name)) MemoRow(s, o, Must(MakeDatatypeKernel(name), "kernel"), 0, report);
  }
  if (wanted("contig")) ContiguousRow(s, o, report);
  if (wanted("mixed")) {
    for (uint64_t mib : {1, 16, 64}) MixedFieldsRow(s, o, mib << 20, false, report);
    // The layout described chunk by chunk: 2 runs a point, at any size.
    for (uint64_t mib : {1, 16, 64}) MixedFieldsRow(s, o, mib << 20, true, report);
  }
  s.c.reset();
  s.peer.reset();
  if (s.daemon.Stop() != 0) {
    Die("isometryd did not stop cleanly after the datatype rows");
  }
}

int DatatypePeerMain(const std::string& socket, uint64_t bytes) {
  std::byte* base = MapBytes(bytes);
  for (uint64_t i = 0; i < bytes; ++i) {
    base[i] = static_cast<std::byte>(PatternByte(i));
  }
  auto c = client::Client::Connect({.local_socket = socket, .name = "dtpeer"});
  if (!c.ok()) {
    std::fprintf(stderr, "datatype peer: %s\n", c.status().ToString().c_str());
    return 1;
  }
  auto range = (*c)->RegisterPrivate(base, bytes);
  if (!range.ok() || !range->Publish().ok()) {
    std::fprintf(stderr, "datatype peer: cannot register and publish its memory\n");
    return 1;
  }
  std::printf("%llu %llu\n", static_cast<unsigned long long>(range->id()),
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(base)));
  std::fflush(stdout);
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
  }
  return 0;
}

}  // namespace isometry::bench
