#include "tools/bench/redistribution_scenarios.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "tools/bench/bench_fail.h"
#include "tools/bench/stopwatch.h"
#include "tools/common/daemon_process.h"

namespace isometry::bench {

namespace {

constexpr uint64_t kProducers = 4;  // rows CYCLIC over a 4 x 1 grid
constexpr uint64_t kConsumers = 2;  // columns BLOCK over a 1 x 2 grid
constexpr uint64_t kColumns = 1024;

// One rank: its session, its local array and its instance.
struct Rank {
  std::unique_ptr<client::Client> client;
  std::optional<client::Allocation> alloc;
  std::optional<client::Instance> inst;
  uint64_t rows = 0, cols = 0;
};

InstanceShape Shape(uint64_t rows, uint64_t cols, bool column_major) {
  return {Box::FromExtents({static_cast<int64_t>(rows), static_cast<int64_t>(cols)}),
          FieldSpace::Uniform(1, sizeof(double)),
          column_major ? Layout::ColumnMajor(2) : Layout::RowMajor(2)};
}

client::DistributedSpec Spec(uint64_t rows, bool producer) {
  using Kind = client::DimDistribution::Kind;
  if (producer) {
    return {{rows, kColumns}, {{Kind::kCyclic, 0}, {Kind::kBlock, 0}}, {kProducers, 1}, false, 8};
  }
  return {{rows, kColumns}, {{Kind::kBlock, 0}, {Kind::kBlock, 0}}, {1, kConsumers}, false, 8};
}

std::unique_ptr<client::Client> Connect(const tools::DaemonProcess& d, const char* name) {
  return Must(client::Client::Connect({.local_socket = d.local_socket(), .name = name}), "connect");
}

// The global array's element (i, j).
double Value(uint64_t i, uint64_t j) { return static_cast<double>(i * kColumns + j); }

// The producer job: rank p holds rows p, p + 4, ... in row-major order.
std::vector<Rank> Producers(const tools::DaemonProcess& d, uint64_t rows) {
  std::vector<Rank> out;
  for (uint64_t p = 0; p < kProducers; ++p) {
    Rank k;
    k.client = Connect(d, "producer");
    k.rows = (rows - p + kProducers - 1) / kProducers;
    k.cols = kColumns;
    k.alloc.emplace(Must(k.client->Allocate("sys0", k.rows * k.cols * 8), "allocate"));
    auto* data = reinterpret_cast<double*>(k.alloc->data());
    for (uint64_t i = 0; i < k.rows; ++i) {
      for (uint64_t j = 0; j < k.cols; ++j) {
        data[i * k.cols + j] = Value(i * kProducers + p, j);
      }
    }
    k.inst.emplace(Must(k.client->Register(*k.alloc, 0, Shape(k.rows, k.cols, false)), "register"));
    Must(k.client->JoinDistributed("rows", Spec(rows, true), p, &*k.inst), "join the producer");
    out.push_back(std::move(k));
  }
  return out;
}

std::string FileOf(uint64_t q) { return StrCat("consumer", q, ".bin"); }

// The consumer job: rank q holds columns [q * 512, (q + 1) * 512) of every
// row, column-major, in file consumer<q>.bin (made here at its size).
std::vector<Rank> Consumers(const tools::DaemonProcess& d, const std::string& dir, uint64_t rows) {
  std::vector<Rank> out;
  for (uint64_t q = 0; q < kConsumers; ++q) {
    Rank k;
    k.client = Connect(d, "consumer");
    k.rows = rows;
    k.cols = kColumns / kConsumers;
    const std::string path = StrCat(dir, "/", FileOf(q));
    const UniqueFd fd(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644));
    if (!fd.valid() || ::ftruncate(fd.get(), static_cast<off_t>(k.rows * k.cols * 8)) != 0) {
      Die(StrCat("cannot make ", path, ": ", ErrnoString(errno)));
    }
    k.inst.emplace(Must(k.client->RegisterFile("dsk0", FileOf(q), 0, Shape(k.rows, k.cols, true)),
                        "register"));
    Must(k.client->JoinDistributed("columns", Spec(rows, false), q, &*k.inst), "join the consumer");
    out.push_back(std::move(k));
  }
  return out;
}

// Dies unless every element of every consumer file is the global array's.
void CheckFiles(const std::string& dir, const std::vector<Rank>& consumers) {
  for (uint64_t q = 0; q < consumers.size(); ++q) {
    const Rank& k = consumers[q];
    std::vector<double> got(k.rows * k.cols);
    const std::string path = StrCat(dir, "/", FileOf(q));
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    const auto want = static_cast<ssize_t>(got.size() * sizeof(double));
    if (!fd.valid() || ::pread(fd.get(), got.data(), static_cast<size_t>(want), 0) != want) {
      Die(StrCat("cannot read ", path));
    }
    for (uint64_t j = 0; j < k.cols; ++j) {
      for (uint64_t i = 0; i < k.rows; ++i) {
        if (got[j * k.rows + i] != Value(i, q * k.cols + j)) {
          Die(StrCat("redistribution_files: ", path, " holds a wrong element at (", i, ", ", j,
                     ")"));
        }
      }
    }
  }
}

// The baseline's copies: the same bytes, contiguous, from the pool into
// the consumers' files (each written whole, durable).
struct PlainWrite {
  std::unique_ptr<client::Client> client;
  std::optional<client::Allocation> alloc;
  std::vector<client::Instance> src, dst;

  PlainWrite(const tools::DaemonProcess& d, const std::vector<Rank>& consumers) {
    client = Connect(d, "plain");
    const uint64_t each = consumers[0].rows * consumers[0].cols * 8;
    alloc.emplace(Must(client->Allocate("sys0", each * consumers.size()), "allocate"));
    std::memset(alloc->data(), 0x5a, alloc->size());
    const InstanceShape flat{Box::FromExtents({static_cast<int64_t>(each / 8)}),
                             FieldSpace::Uniform(1, 8), Layout::Aos(1)};
    for (uint64_t q = 0; q < consumers.size(); ++q) {
      src.push_back(Must(client->Register(*alloc, q * each, flat), "register"));
      dst.push_back(Must(client->RegisterFile("dsk0", FileOf(q), 0, flat), "register"));
    }
  }
  void Run() {
    std::vector<uint64_t> tickets;
    for (size_t q = 0; q < src.size(); ++q) {
      tickets.push_back(Must(client->Submit(src[q], dst[q]), "submit"));
    }
    for (const uint64_t t : tickets) {
      if (Status s = client->Wait(t).status; !s.ok()) {
        Die(StrCat("plain durable write: ", s.ToString()));
      }
    }
  }
};

}  // namespace

void RunRedistributionFiles(const RedistributionOptions& o, Report& report) {
  std::string dir = StrCat(o.dir, "/isometry-bench-redistribution-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    Die(StrCat("redistribution_files: cannot make a directory in ", o.dir, ": ",
               ErrnoString(errno)));
  }
  const uint64_t rows = std::max<uint64_t>(kProducers, o.bytes / (kColumns * 8) / 2 * 2);
  const uint64_t bytes = rows * kColumns * 8;
  const uint64_t pool_mib = 2 * (bytes >> 20) + 64;
  const std::string config = StrCat(R"(
[[memory]]
name = "sys0"
pool = ")",
                                    pool_mib, R"(MiB"
client_quota = ")",
                                    pool_mib, R"(MiB"
[[memory]]
name = "dsk0"
kind = "DSK"
directory = ")",
                                    dir, R"("
[[channel]]
name = "memcpy0"
[[channel]]
name = "disk_read0"
kind = "disk_read"
[[channel]]
name = "disk_write0"
kind = "disk_write"
)");
  {
    tools::DaemonProcess d = Must(tools::DaemonProcess::Start(o.isometryd, config), "isometryd");
    std::vector<Rank> producers = Producers(d, rows);
    std::vector<Rank> consumers = Consumers(d, dir, rows);
    PlainWrite plain(d, consumers);
    auto redistribute = [&] {
      if (Status s = consumers[0].client->Redistribute("rows", "columns").status; !s.ok()) {
        Die(StrCat("redistribution_files: ", s.ToString()));
      }
    };
    redistribute();  // untimed: checked, and the files' blocks allocated as for the baseline
    CheckFiles(dir, consumers);
    Rounds rounds;
    const double gb = static_cast<double>(bytes) / 1e9;
    for (int r = 0; r < o.rounds; ++r) {
      const auto [ours, base] = PairedRound(r, redistribute, [&] { plain.Run(); });
      rounds.Add(gb / ours, gb / base);
    }
    rounds.Print("redistribution_files: into 1-element file runs vs plain durable write");
    Row row = MedianRow("redistribution_files", "cyclic_rows_into_column_major_files", rounds,
                        "plain durable write of the same bytes", ">= 0.5");
    row.bytes = bytes;
    row.predicted.note = kNoDaemonPlan;
    report.Add(std::move(row));
    if (d.Stop() != 0) {
      Die("redistribution_files: isometryd did not stop cleanly");
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace isometry::bench
