// The Isometry benchmark harness. Every scenario measures Isometry and its
// baseline in the same run and prints the ratio, because shared machines are
// noisy. `--json` prints one object per line for scripts.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <set>
#include <string>

#include "core/lock_checks.h"
#include "core/main_guard.h"
#include "core/unique_fd.h"
#include "daemon/cpu_latency.h"
#include "tools/bench/daemon_scenarios.h"
#include "tools/bench/datatype_scenarios.h"
#include "tools/bench/disk_scenarios.h"
#include "tools/bench/local_scenarios.h"
#include "tools/bench/planner_scenarios.h"
#include "tools/bench/redistribution_scenarios.h"
#include "tools/common/daemon_process.h"

using namespace isometry::bench;

namespace {

// Runs the scenarios named in `only` (all when empty); 2 for an unknown name.
int RunChosen(const std::vector<std::string>& only, bool json, const LocalOptions& local,
              const DaemonOptions& daemon, const DatatypeOptions& datatype,
              const std::string& disk_dir, double disk_mib,
              const RedistributionOptions& redistribution) {
  const std::set<std::string> chosen(only.begin(), only.end());
  auto wanted = [&](const char* name) { return chosen.empty() || chosen.count(name); };
  for (const std::string& s : chosen) {
    if (s != "contiguous" && s != "aos_to_soa" && s != "pipeline" && s != "priority" &&
        s != "client_to_client" && s != "latency" && s != "first_copy" && s != "disk" &&
        s != "planning" && s != "datatype" && s != "redistribution") {
      std::fprintf(stderr, "unknown scenario '%s'\n", s.c_str());
      return 2;
    }
  }
  Report report(json);
  if (wanted("contiguous")) {
    RunContiguous(local, report);
  }
  if (wanted("aos_to_soa")) {
    RunAosToSoa(local, report);
  }
  if (wanted("pipeline")) {
    RunPipeline(local, report);
  }
  if (wanted("priority")) {
    RunPriority(local, report);
  }
  if (wanted("client_to_client")) {
    RunClientToClient(daemon, report);
  }
  if (wanted("latency")) {
    RunLatency(daemon, report);
  }
  if (wanted("first_copy")) {
    RunFirstCopy(daemon, report);
  }
  if (wanted("planning")) {
    RunPlanning(local.rounds, report);
  }
  if (wanted("datatype")) {
    RunDatatype(datatype, report);
  }
  if (wanted("disk")) {
    RunDisk(disk_dir, static_cast<uint64_t>(disk_mib * (1 << 20)), report, local.rounds,
            local.calibrate);
  }
  if (wanted("redistribution")) {
    RunRedistributionFiles(redistribution, report);
  }
  report.Finish();
  return 0;
}

// What the whole run holds: the log level of the in-process runtimes and a
// CPU wake-up latency request.
struct RunEnvironment {
  std::optional<uint32_t> cpu_latency_us;
  bool verbose = false;

  void AddOptions(CLI::App& app) {
    app.add_option(
           "--cpu-latency-us", cpu_latency_us,
           "hold a CPU wake-up latency request of this many microseconds for the whole run "
           "(/dev/cpu_dma_latency, root; what isometryd's daemon.cpu_latency_us does): Isometry "
           "and every baseline then run with it. Without it the node's idle states apply")
        ->check(CLI::Range(0, 1000000));
    app.add_flag("--verbose", verbose,
                 "log what each in-process Runtime's calibration measured (to stderr): the "
                 "figures its predictions come from");
  }

  // The request, held while the result lives (an empty descriptor without
  // --cpu-latency-us); nullopt, said on stderr, when it cannot be held.
  std::optional<isometry::UniqueFd> Apply() const {
    spdlog::set_level(verbose ? spdlog::level::info : spdlog::level::warn);
    if (!cpu_latency_us) return isometry::UniqueFd();
    auto held = isometry::HoldCpuLatency(*cpu_latency_us);
    if (!held.ok()) {
      std::fprintf(stderr, "--cpu-latency-us: %s\n", held.status().ToString().c_str());
      return std::nullopt;
    }
    std::fprintf(stderr, "holding a CPU wake-up latency request of %u us for the run\n",
                 *cpu_latency_us);
    return *std::move(held);
  }
};

// The datatype rows' flags (docs/benchmarks/datatypes.md, "Datatype rows").
struct DatatypeFlags {
  double seconds = 0.2;
  bool no_own_hops = false;
  bool no_direct_reads = false;
  uint32_t direct_read_threads = 2;
  bool no_served_reads = false;
  std::vector<std::string> kernels;

  DatatypeOptions Options(const std::string& isometryd, const std::string& source_dir, int rounds,
                          bool peers) const {
    return DatatypeOptions{
        isometryd,        source_dir,          rounds,           seconds, peers, !no_own_hops,
        !no_direct_reads, direct_read_threads, !no_served_reads, kernels};
  }
};

void AddDatatypeFlags(CLI::App& app, DatatypeFlags& f) {
  app.add_option("--datatype-seconds", f.seconds,
                 "datatype rows: timed copies per side and round, in seconds")
      ->check(CLI::Range(0.01, 60.0));
  app.add_flag("--no-own-hops", f.no_own_hops,
               "datatype rows: the daemon writes the benchmark's own memory by CMA instead of "
               "the client running that hop itself "
               "(docs/guides/client-memory.md, \"Hops the client runs itself\")");
  app.add_flag("--no-direct-reads", f.no_direct_reads,
               "datatype rows: copies go through the daemon instead of the benchmark reading "
               "the peer's memory itself by a lease "
               "(docs/guides/client-memory.md, \"Direct reads\")");
  app.add_option("--direct-read-threads", f.direct_read_threads,
                 "datatype rows: threads sharing one direct read of 1 MiB or more (1 or 2)")
      ->check(CLI::Range(1, 2));
  app.add_flag("--no-served-reads", f.no_served_reads,
               "datatype rows: direct reads go through the kernel instead of the peer packing "
               "into its serve window (docs/guides/client-memory.md, \"Served reads\")");
  app.add_option(
         "--datatype-kernels", f.kernels,
         "datatype rows: only these kernels (vector, contig, mixed, wrf_y_vec, milc_su3_zd, "
         "nas_mg_z, specfem3d_oc, lammps_atomic, fft2d; default: all)")
      ->delimiter(',');
}

int Main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == kDatatypePeerFlag) {  // the datatype rows' peer
    return DatatypePeerMain(argv[2], std::stoull(argv[3]));
  }
  isometry::SetLockOrderChecksForBuild();  // as isometryd does: measure what users run
  CLI::App app{"isometry_bench: Isometry against the physical limit and its peers"};
  bool json = false;
  std::vector<std::string> only;
  LocalOptions local;
  std::vector<double> contiguous_mib = {static_cast<double>(local.contiguous_bytes[0] >> 20)};
  double pipeline_mib = static_cast<double>(local.pipeline_bytes >> 20);
  double hop_rate_gib = 1.0;
  app.add_flag("--json", json, "one JSON object per line instead of a table");
  app.add_option("--scenario", only,
                 "run only these: contiguous, aos_to_soa, pipeline, priority, client_to_client, "
                 "latency, first_copy, datatype, disk, planning, redistribution (default: all)");
  app.add_option("--rounds,--repeat", local.rounds,
                 "paired rounds per row: Isometry and its baseline back to back in each, the "
                 "table shows the median of the per-round ratios and their range (at least 5 "
                 "for figures you report; --repeat is the old name)")
      ->check(CLI::Range(1, 100));
  RunEnvironment env;
  env.AddOptions(app);
  bool no_calibrate = false;
  app.add_flag("--no-calibrate", no_calibrate,
               "skip the channels' calibration at each in-process Runtime's start (faster; "
               "every edge then counts as 1 GB/s, so the predicted column means nothing)");
  app.add_option("--contiguous-mib", contiguous_mib,
                 "size(s) of the contiguous copy, e.g. 16,64,256,1024 for a size sweep")
      ->delimiter(',')
      ->check(CLI::Range(1.0, 65536.0));
  app.add_option("--pipeline-mib", pipeline_mib, "size of the two-hop copies")
      ->check(CLI::Range(1.0, 65536.0));
  app.add_option("--aos-entries", local.aos_entries, "entries of the AOS->SOA copy");
  app.add_option("--hop-rate-gib", hop_rate_gib, "per-hop bandwidth cap in GiB/s (capped variant)")
      ->check(CLI::Range(0.01, 1000.0));
  DaemonOptions daemon;
  daemon.isometryd = isometry::tools::DaemonProcess::Locate(argv[0]);
  daemon.source_dir = ISOMETRY_BENCH_SOURCE_DIR;
  bool no_peers = false;
  app.add_option("--isometryd", daemon.isometryd, "daemon binary for the daemon scenarios");
  app.add_option("--latency-iterations", daemon.latency_iterations,
                 "4 KiB copies on the ring per round")
      ->check(CLI::Range(100, 10000000));
  app.add_option("--grpc-iterations", daemon.grpc_iterations, "4 KiB copies over gRPC per round")
      ->check(CLI::Range(100, 10000000));
  app.add_option("--ring-poll-us", daemon.ring_poll_us,
                 "latency: the daemon's daemon.ring_poll_us (default 50)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--client-spin-us", daemon.client_spin_us,
                 "latency: the ring client's ClientOptions::spin_us (default 50)")
      ->check(CLI::Range(0, 100000));
  app.add_flag("--no-peers", no_peers,
               "skip UCX / MPICH / Open MPI in client_to_client, datatype and latency");
  std::string disk_dir = "/var/tmp";
  double disk_mib = 1024;
  app.add_option("--disk-dir", disk_dir,
                 "scratch directory for the disk scenario (O_DIRECT-capable)");
  app.add_option("--disk-mib", disk_mib, "bytes the disk scenario writes and reads")
      ->check(CLI::Range(1.0, 1048576.0));
  double redistribution_mib = 64;
  app.add_option("--redistribution-mib", redistribution_mib,
                 "redistribution: bytes of the global array (into DSK files in --disk-dir)")
      ->check(CLI::Range(1.0, 4096.0));
  DatatypeFlags datatype_flags;
  AddDatatypeFlags(app, datatype_flags);
  CLI11_PARSE(app, argc, argv);
  local.calibrate = !no_calibrate;
  local.contiguous_bytes.clear();
  for (const double mib : contiguous_mib) {
    local.contiguous_bytes.push_back(static_cast<uint64_t>(mib * (1 << 20)) / 8 * 8);
  }
  local.pipeline_bytes = static_cast<uint64_t>(pipeline_mib * (1 << 20)) / 8 * 8;
  local.hop_rate = static_cast<uint64_t>(hop_rate_gib * (1ull << 30));
  const auto held = env.Apply();  // held until the run ends
  if (!held) return 2;
  daemon.peers = !no_peers;
  daemon.rounds = local.rounds;

  const DatatypeOptions datatype =
      datatype_flags.Options(daemon.isometryd, daemon.source_dir, local.rounds, daemon.peers);
  const RedistributionOptions redistribution{daemon.isometryd, disk_dir,
                                             static_cast<uint64_t>(redistribution_mib * (1 << 20)),
                                             local.rounds};
  return RunChosen(only, json, local, daemon, datatype, disk_dir, disk_mib, redistribution);
}

}  // namespace

int main(int argc, char** argv) { return isometry::RunMain("isometry_bench", 1, Main, argc, argv); }
