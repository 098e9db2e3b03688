#include "tools/bench/disk_scenarios.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "channels/added_channels.h"
#include "channels/disk/disk_channel.h"
#include "channels/disk/disk_file.h"
#include "channels/request_stream.h"
#include "config/runtime_config.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "daemon/runtime/runtime.h"
#include "tools/bench/fio.h"
#include "tools/bench/host_buffer.h"
#include "tools/bench/prediction.h"
#include "tools/bench/stopwatch.h"

namespace isometry::bench {

namespace {

constexpr uint64_t kRun = 1ull << 20;      // bytes per run, like fio's bs=1M
constexpr uint64_t kRequest = 4ull << 20;  // the channel's request_bytes

// Moves `bytes` between `host` (cycled) and the file with requests of four
// 1 MiB runs, max_in_flight at a time. Returns seconds, or nullopt after
// printing the failure.
std::optional<double> RunChannel(Channel& channel, bool write, const FileRange& file,
                                 uint64_t bytes, const HostBuffer& host) {
  auto request = [&](uint64_t k) {
    const uint64_t off = k * kRequest;
    const uint64_t runs = std::min(kRequest, bytes - off) / kRun;
    auto program = std::make_shared<CopyProgram>();
    CopyOp op;
    op.run_bytes = kRun;
    op.num_loops = 1;
    op.loops[0] = {runs, kRun, kRun};
    program->ops.push_back(op);
    program->bytes = runs * kRun;
    program->runs = runs;
    std::byte* mem = host.data() + off % host.size();
    FileRange ref = file;
    ref.offset = off;
    ChannelRequest req{.program = std::move(program)};
    if (write) {
      req.src = HostBytes{mem};
      req.dst = ref;
    } else {
      req.src = ref;
      req.dst = HostBytes{mem};
    }
    return req;
  };
  const auto t0 = Clock::now();
  const Result<uint64_t> done =
      StreamRequests(channel, request, [&](uint64_t k) { return k * kRequest < bytes; });
  const double seconds = SecondsSince(t0);
  if (!done.ok()) {
    std::fprintf(stderr, "disk bench: %s\n", done.status().ToString().c_str());
    return std::nullopt;
  }
  return seconds;
}

std::unique_ptr<Channel> MakeOrDie(ChannelKind kind, const char* name) {
  ChannelConfig c;
  c.name = name;
  c.kind = kind;
  c.request_bytes = kRequest;
  auto ch = MakeDiskChannel(c);
  if (!ch.ok()) {
    std::fprintf(stderr, "disk bench: %s\n", ch.status().ToString().c_str());
    // A benchmark that cannot go on ends the process; the rows so far are
    // void and no state needs an orderly shutdown.
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
  std::fprintf(stderr, "  %s\n", DescribeDiskChannel(**ch).c_str());
  return *std::move(ch);
}

// ---- Runtime level: the same I/O as a user's Copy() to and from a file ----

// The default memories and Memcpy channel plus DSK memory `dsk0` on `dir`
// and disk channels with the Memcpy channel's settings (4 MiB requests, so
// 1-hop chunks are the channel scenario's requests). The space threshold
// and ring depth stay at their defaults: the ring buffers of a converting
// write are the ones a user gets.
RuntimeConfig DiskRuntimeConfig(const std::string& dir, bool calibrate) {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.calibrate = calibrate;
  AddDiskMemory(c, dir);
  return c;
}

// Seconds from Copy() to the end of Wait(): opening, every chunk and, for a
// DSK destination, fdatasync (when durable) and the rename. nullopt after
// printing the failure.
std::optional<double> TimedCopy(Runtime& rt, CopyRequest req, const char* what) {
  const auto t0 = Clock::now();
  auto t = rt.Copy(std::move(req));
  const Status s = t.ok() ? t->Wait() : t.status();
  const double seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::fprintf(stderr, "disk bench: %s: %s\n", what, s.ToString().c_str());
    return std::nullopt;
  }
  return seconds;
}

// Seconds of fdatasync(path) plus fsync(dir), or nullopt (printed).
std::optional<double> TimedSync(const std::string& path, const std::string& dir) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::optional<double> out;
  if (fd.valid() && dfd.valid()) {
    const auto t0 = Clock::now();
    if (::fdatasync(fd.get()) == 0 && ::fsync(dfd.get()) == 0) {
      out = SecondsSince(t0);
    }
  }
  if (!out) {
    std::fprintf(stderr, "disk bench: syncing %s: %s\n", path.c_str(), ErrnoString(errno).c_str());
  }
  return out;
}

// The shortest time seen (the detail lines printed besides the medians).
struct Best {
  double seconds = 1e300;
  void Add(double s) { seconds = std::min(seconds, s); }
};

// DSK->SYS and SYS->DSK of `bytes` through the Runtime against fio, and an
// AOS (SYS) -> SOA (file) write pipelined in one Copy against staged
// (convert all into SYS, then write). Each round runs every runtime case
// once (Round) and fio once (Fio); the rows are the rounds' medians.
class DiskRuntimeBench {
 public:
  DiskRuntimeBench(Runtime& rt, const std::string& dir, uint64_t bytes)
      : rt_(rt),
        sys_(*rt.FindMemory("sys0")),
        dsk_(*rt.FindMemory("dsk0")),
        dir_(dir),
        bytes_(bytes),
        plain_name_(StrCat("isometry-bench-rt-", ::getpid(), ".bin")),
        soa_name_(StrCat("isometry-bench-soa-", ::getpid(), ".bin")),
        dd_name_(StrCat("isometry-bench-dd-", ::getpid(), ".bin")),
        dd_path_(StrCat(dir, "/", dd_name_)),
        plain_path_(StrCat(dir, "/", plain_name_)),
        soa_path_(StrCat(dir, "/", soa_name_)),
        fio_path_(StrCat(dir, "/isometry-bench-rt-fio-", ::getpid(), ".bin")),
        plain_{Box::FromExtents({static_cast<int64_t>(bytes / 8)}), FieldSpace::Uniform(1, 8),
               Layout::Aos(1)},
        n_(static_cast<int64_t>(bytes / 32)),
        aos_bytes_(static_cast<uint64_t>(n_) * 32),
        aos_{Box::FromExtents({n_}), FieldSpace::Uniform(8, 4), Layout::Aos(1)},
        soa_{aos_.bounds, aos_.fields, Layout::Soa(1)},
        rows_{Box::FromExtents({16, static_cast<int64_t>(bytes / 128)}), FieldSpace::Uniform(1, 8),
              *Layout::Parse("F,x,y", 2)},
        cols_{rows_.bounds, rows_.fields, *Layout::Parse("F,y,x", 2)},
        a_(bytes, 0),
        b_(bytes, 0) {
    uint32_t* w = reinterpret_cast<uint32_t*>(a_.data());
    for (uint64_t k = 0; k < bytes / 4; ++k) {
      w[k] = static_cast<uint32_t>(k);
    }
  }

  void RemoveFiles() const {
    for (const std::string* p : {&plain_path_, &soa_path_, &fio_path_, &dd_path_}) {
      ::unlink(p->c_str());
    }
  }

  // fio's write (no fsync), read, and write ending with fsync (the durable
  // baseline), once.
  void Fio() {
    ::unlink(fio_path_.c_str());
    for (int i : {2, 0, 1}) {  // the read reads the last write's file
      const FioResult f = RunFio(fio_path_, i != 1, bytes_, kDefaultQueueDepth, i == 2);
      fio_round_[i] = f.ok ? f.bytes_per_s / 1e9 : 0;
      KeepBest(fio_[i], f);
      if (i == 2) {
        ::unlink(fio_path_.c_str());
      }
    }
  }

  // Every runtime case once; the first round also checks what was copied.
  // False after printing a failure.
  bool Round(bool first) {
    return PlainWriteRead(first) && Transpose(first) && PlainWriteNoSync() && AosToSoa(first);
  }

  // Adds the last round (runtime and fio) to the medians.
  void AddRound() {
    const double gb = static_cast<double>(bytes_) / 1e9;
    read_rounds_.Add(gb / last_read_, fio_round_[1]);
    write_rounds_.Add(gb / last_write_, fio_round_[2]);
    nosync_rounds_.Add(gb / last_nosync_, fio_round_[0]);
    const double aos_gb = static_cast<double>(aos_bytes_) / 1e9;
    convert_rounds_.Add(aos_gb / last_pipelined_, gb / last_write_);
    staged_rounds_.Add(aos_gb / last_pipelined_, aos_gb / last_staged_);
    dd_rounds_.Add(gb / last_dd_, gb / (last_read_ + last_write_));
  }

  // The plans' predictions for the copies the rows measure; before
  // RemoveFiles (a DSK source is planned from its file).
  void Predict() {
    write_plan_ = PredictionOf(rt_, Host(a_, plain_), File(plain_name_, plain_));
    nosync_plan_ = PredictionOf(rt_, Host(a_, plain_), File(plain_name_, plain_), false);
    read_plan_ = PredictionOf(rt_, File(plain_name_, plain_), Host(b_, plain_));
    aos_plan_ = PredictionOf(rt_, Host(a_, aos_), File(soa_name_, soa_));
    dd_plan_ = PredictionOf(rt_, File(plain_name_, rows_), File(dd_name_, cols_));
  }

  void Print(bool direct, Report& report) const;

 private:
  InstanceRef Host(const HostBuffer& buf, const InstanceShape& s) const {
    return InstanceRef{sys_, buf.data(), buf.size(), s};
  }
  InstanceRef File(const std::string& name, const InstanceShape& s) const {
    InstanceRef r;
    r.memory = dsk_;
    r.shape = s;
    r.file = name;
    return r;
  }
  // True when `b` holds the SOA form of `a`.
  bool SoaOk() const {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(b_.data());
    for (int64_t f = 0; f < 8; ++f) {
      for (int64_t i = 0; i < n_; ++i) {
        if (w[f * n_ + i] != static_cast<uint32_t>(8 * i + f)) {
          return false;
        }
      }
    }
    return true;
  }

  bool PlainWriteRead(bool first);
  bool Transpose(bool first);
  bool PlainWriteNoSync();
  bool AosToSoa(bool first);

  Runtime& rt_;
  const MemoryId sys_, dsk_;
  const std::string dir_;
  const uint64_t bytes_;
  const std::string plain_name_, soa_name_, dd_name_;
  const std::string dd_path_, plain_path_, soa_path_, fio_path_;
  // Plain: a contiguous 1-D instance of 8-byte entries. Converting: 8 fields
  // of 4 bytes, AOS in SYS, SOA in the file (the file system's 4 KiB
  // alignment holds: bytes is a multiple of 1 MiB, so each SOA field is too).
  const InstanceShape plain_;
  const int64_t n_;
  const uint64_t aos_bytes_;
  const InstanceShape aos_, soa_;
  // DSK -> DSK: the plain file read as a 16 x (bytes / 128) matrix of
  // 8-byte values, written transposed (F,x,y -> F,y,x: rows become columns).
  const InstanceShape rows_, cols_;
  // `a`: the source of every write (word k holds k, so AOS entry i field f
  // holds 8i + f). `b`: the read destination and the staged SOA buffer.
  HostBuffer a_, b_;

  Best write_, fsync_cost_, staged_convert_, staged_write_;
  // The last round's times, for the per-round pairs.
  double last_write_ = 0, last_nosync_ = 0, last_read_ = 0, last_pipelined_ = 0, last_staged_ = 0;
  double last_dd_ = 0;
  // write (no fsync), read, write ending with fsync (the durable baseline).
  FioResult fio_[3];
  double fio_round_[3] = {};
  Rounds read_rounds_, write_rounds_, nosync_rounds_, convert_rounds_, staged_rounds_, dd_rounds_;
  Prediction write_plan_, nosync_plan_, read_plan_, aos_plan_, dd_plan_;
};

bool DiskRuntimeBench::PlainWriteRead(bool first) {
  ::unlink(plain_path_.c_str());  // the rename would free the old file's blocks in the timing
  auto s = TimedCopy(rt_, {.src = Host(a_, plain_), .dst = File(plain_name_, plain_)}, "SYS->DSK");
  if (!s) {
    return false;
  }
  write_.Add(*s);
  last_write_ = *s;
  std::memset(b_.data(), 0, b_.size());
  s = TimedCopy(rt_, {.src = File(plain_name_, plain_), .dst = Host(b_, plain_)}, "DSK->SYS");
  if (!s) {
    return false;
  }
  last_read_ = *s;
  if (first && std::memcmp(a_.data(), b_.data(), bytes_) != 0) {
    std::fprintf(stderr, "disk bench: DSK->SYS read back other bytes than SYS->DSK wrote\n");
    return false;
  }
  return true;
}

bool DiskRuntimeBench::Transpose(bool first) {
  ::unlink(dd_path_.c_str());
  auto s =
      TimedCopy(rt_, {.src = File(plain_name_, rows_), .dst = File(dd_name_, cols_)}, "DSK->DSK");
  if (!s) {
    return false;
  }
  last_dd_ = *s;
  if (first) {  // row x of the source is column x of the copy
    std::memset(b_.data(), 0, b_.size());
    if (!TimedCopy(rt_, {.src = File(dd_name_, cols_), .dst = Host(b_, cols_)}, "DSK->DSK check")) {
      return false;
    }
    const uint64_t n_cols = bytes_ / 128;
    for (uint64_t x = 0; x < 16; ++x) {
      for (uint64_t y = 0; y < n_cols; y += 4099) {
        if (std::memcmp(b_.data() + 8 * (x * n_cols + y), a_.data() + 8 * (y * 16 + x), 8) != 0) {
          std::fprintf(stderr, "disk bench: DSK->DSK transpose differs at (%llu, %llu)\n",
                       static_cast<unsigned long long>(x), static_cast<unsigned long long>(y));
          return false;
        }
      }
    }
  }
  ::unlink(dd_path_.c_str());
  return true;
}

bool DiskRuntimeBench::PlainWriteNoSync() {
  ::unlink(plain_path_.c_str());
  auto s = TimedCopy(
      rt_,
      {.src = Host(a_, plain_), .dst = File(plain_name_, plain_), .options = {.durable = false}},
      "SYS->DSK (durable=false)");
  if (!s) {
    return false;
  }
  last_nosync_ = *s;
  // What durable=true adds, measured directly: the data went out with
  // O_DIRECT, so this is the file's metadata, the device cache flush and
  // the directory (DiskEndpoint::Commit syncs both).
  if (const auto sync = TimedSync(plain_path_, dir_)) {
    fsync_cost_.Add(*sync);
  }
  return true;
}

bool DiskRuntimeBench::AosToSoa(bool first) {
  ::unlink(soa_path_.c_str());
  auto s = TimedCopy(rt_, {.src = Host(a_, aos_), .dst = File(soa_name_, soa_)}, "AOS->SOA file");
  if (!s) {
    return false;
  }
  last_pipelined_ = *s;
  if (first) {
    std::memset(b_.data(), 0, b_.size());
    if (!TimedCopy(rt_, {.src = File(soa_name_, soa_), .dst = Host(b_, soa_)}, "SOA file read")) {
      return false;
    }
    if (!SoaOk()) {
      std::fprintf(stderr, "disk bench: the AOS->SOA file does not hold the SOA of the source\n");
      return false;
    }
  }
  ::unlink(soa_path_.c_str());
  const auto convert = TimedCopy(rt_, {.src = Host(a_, aos_), .dst = Host(b_, soa_)}, "AOS->SOA");
  if (!convert) {
    return false;
  }
  s = TimedCopy(rt_, {.src = Host(b_, soa_), .dst = File(soa_name_, soa_)}, "SOA->file");
  if (!s) {
    return false;
  }
  last_staged_ = *convert + *s;
  staged_convert_.Add(*convert);
  staged_write_.Add(*s);
  return true;
}

void DiskRuntimeBench::Print(bool direct, Report& report) const {
  read_rounds_.Print("runtime DSK->SYS vs fio read");
  write_rounds_.Print("runtime SYS->DSK (durable) vs fio write + end_fsync");
  nosync_rounds_.Print("runtime SYS->DSK (durable=false) vs fio write");
  convert_rounds_.Print("AOS->SOA file vs plain durable write");
  staged_rounds_.Print("AOS->SOA file pipelined vs staged");
  dd_rounds_.Print("DSK->DSK transposed vs DSK->SYS read + SYS->DSK write of the same bytes");

  const double sync_ms = fsync_cost_.seconds < 1e300 ? fsync_cost_.seconds * 1e3 : -1;
  std::fprintf(stderr,
               "  runtime SYS->DSK: best %.1f ms durable; fdatasync + directory fsync of the "
               "written file: %.1f ms (%.1f%% of the durable write)%s\n",
               write_.seconds * 1e3, sync_ms, 100 * sync_ms / (write_.seconds * 1e3),
               sync_ms > 0.5 * write_.seconds * 1e3 ? ": fdatasync dominates" : "");
  std::fprintf(stderr, "  staged AOS->SOA (best of each): convert %.1f ms, write %.1f ms\n",
               staged_convert_.seconds * 1e3, staged_write_.seconds * 1e3);
  auto add = [&](Row row, const Prediction& p) {
    row.bytes = row.scenario == "aos_to_soa_to_disk" ? aos_bytes_ : bytes_;
    report.Add(WithPrediction(std::move(row), p));
  };
  if (fio_[0].ok && fio_[1].ok && fio_[2].ok) {
    add(MedianRow("disk_read_runtime", "throughput", read_rounds_, FioBaseline(false, direct),
                  ">= 0.9"),
        read_plan_);
    add(MedianRow("disk_write_runtime", "throughput", write_rounds_,
                  FioBaseline(true, direct, true), ">= 0.9"),
        write_plan_);
    add(MedianRow("disk_write_runtime", "durable=false", nosync_rounds_, FioBaseline(true, direct),
                  ""),
        nosync_plan_);
  } else {
    for (const FioResult& f : fio_) {
      if (!f.ok) {
        std::fprintf(stderr, "  fio unavailable: %s\n", f.detail.c_str());
      }
    }
  }
  if (sync_ms >= 0) {
    Row row{"disk_write_runtime",
            "fdatasync",
            sync_ms,
            "ms",
            "the whole durable write (best)",
            write_.seconds * 1e3,
            sync_ms / (write_.seconds * 1e3),
            "report"};
    row.predicted.note = "no plan: a time row (best of the rounds)";
    report.Add(std::move(row));
  }
  add(MedianRow("aos_to_soa_to_disk", "throughput", staged_rounds_,
                "staged (convert all, then write)", ""),
      aos_plan_);
  add(MedianRow("aos_to_soa_to_disk", "vs_plain_write", convert_rounds_,
                "plain durable write (disk_write_runtime)", ">= 0.9"),
      aos_plan_);
  add(MedianRow("dsk_to_dsk_transpose", "throughput", dd_rounds_,
                "read into SYS, then durable write (same bytes)", ">= 0.9"),
      dd_plan_);
}

// `rounds` rounds of DiskRuntimeBench, runtime and fio in alternating order.
// Removes its files.
void RunDiskRuntime(const std::string& dir, uint64_t bytes, int rounds, bool direct, bool calibrate,
                    Report& report) {
  auto created = Runtime::Create(DiskRuntimeConfig(dir, calibrate));
  if (!created.ok()) {
    std::fprintf(stderr, "disk bench: runtime: %s\n", created.status().ToString().c_str());
    return;
  }
  DiskRuntimeBench bench(**created, dir, bytes);
  for (int rep = 0; rep < rounds; ++rep) {
    if (rep % 2) {
      bench.Fio();
    }
    if (!bench.Round(rep == 0)) {
      bench.RemoveFiles();
      return;
    }
    if (rep % 2 == 0) {
      bench.Fio();
    }
    bench.AddRound();
  }
  bench.Predict();
  bench.RemoveFiles();
  bench.Print(direct, report);
}

}  // namespace

void RunDisk(const std::string& dir, uint64_t bytes, Report& report, int rounds, bool calibrate) {
  bytes = std::max(kRun, bytes / kRun * kRun);
  const std::string path = StrCat(dir, "/isometry-bench-disk-", ::getpid(), ".bin");
  auto writer = MakeOrDie(ChannelKind::kDiskWrite, "dsk_w");
  auto reader = MakeOrDie(ChannelKind::kDiskRead, "dsk_r");
  // Host memory as large as the transfer, like a user's copy into a pool
  // allocation (and the runtime rows below). fio allocates only iodepth x bs
  // and reuses it, but reads into such a small reused buffer can be bimodal,
  // fixed for the life of the process (fio shows the same two levels, per
  // run), whatever CPU the process is pinned to and with or without
  // transparent huge pages, where reads into a buffer the size of the
  // transfer are steady (docs/benchmarks/design-measurements.md, "Benchmark
  // method"). The likely cause is the physical contiguity of the few pages a
  // small buffer gets, which decides how many virtio segments (and device
  // requests) a 1 MiB I/O becomes.
  const HostBuffer host(bytes, 7);
  const unsigned depth = kDefaultQueueDepth;  // fio gets the channel's queue depth

  double ours_round[2] = {}, fio_round[2] = {};  // this round's seconds, GB/s
  FioResult fio[2];
  bool direct = true;
  // Each round: the channels write a fresh file and read it back, and fio
  // does the same, in alternating order (the disk is shared and noisy: the
  // rows are medians of the rounds).
  auto channels = [&]() -> bool {
    ::unlink(path.c_str());
    for (const bool write : {true, false}) {
      auto file = DiskFile::Open(path, write ? DiskFile::Mode::kWrite : DiskFile::Mode::kRead);
      if (!file.ok()) {
        std::fprintf(stderr, "disk bench: %s\n", file.status().ToString().c_str());
        return false;
      }
      direct = direct && file->direct_fd() >= 0;
      // Sized before the timing, as fio and DiskEndpoint::OpenForWrite do.
      // Otherwise every write extends the file, and ext4 runs an extending
      // O_DIRECT write synchronously under the exclusive inode lock: the
      // queue depth collapses to 1, which fio never measures.
      if (write && ::ftruncate(file->fd(), static_cast<off_t>(bytes)) != 0) {
        std::fprintf(stderr, "disk bench: ftruncate %s: %s\n", path.c_str(),
                     ErrnoString(errno).c_str());
        return false;
      }
      const auto s = RunChannel(write ? *writer : *reader, write, file->Ref(), bytes, host);
      if (!s) {
        return false;
      }
      ours_round[!write] = *s;
    }
    return true;
  };
  auto with_fio = [&] {
    ::unlink(path.c_str());
    for (const bool write : {true, false}) {
      const FioResult f = RunFio(path, write, bytes, depth);
      fio_round[!write] = f.ok ? f.bytes_per_s / 1e9 : 0;
      KeepBest(fio[!write], f);
    }
  };
  Rounds per_round[2];
  const double gb = static_cast<double>(bytes) / 1e9;
  for (int rep = 0; rep < rounds; ++rep) {
    if (rep % 2) {
      with_fio();
    }
    if (!channels()) {
      ::unlink(path.c_str());
      return;
    }
    if (rep % 2 == 0) {
      with_fio();
    }
    for (int i : {0, 1}) {
      per_round[i].Add(gb / ours_round[i], fio_round[i]);
    }
  }
  ::unlink(path.c_str());
  per_round[0].Print("channel write vs fio write");
  per_round[1].Print("channel read vs fio read");

  for (const bool write : {true, false}) {
    const FioResult& f = fio[!write];
    if (!f.ok) {
      std::fprintf(stderr, "  fio unavailable: %s\n", f.detail.c_str());
      continue;
    }
    Row row = MedianRow(write ? "disk_write_1MiB" : "disk_read_1MiB", "throughput",
                        per_round[!write], FioBaseline(write, direct), ">= 0.9");
    row.bytes = bytes;
    row.predicted.note = "no plan: the channel alone, no planner involved";
    report.Add(std::move(row));
  }
  if (!direct) {
    std::fprintf(stderr, "  note: %s has no O_DIRECT; the channel used the page cache\n",
                 dir.c_str());
  }

  RunDiskRuntime(dir, bytes, rounds, direct, calibrate, report);
}

}  // namespace isometry::bench
