#include "tools/bench/disk_scenarios.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "channels/disk/disk_channel.h"
#include "channels/disk/disk_file.h"
#include "config/runtime_config.h"
#include "daemon/runtime/runtime.h"
#include "tools/bench/host_buffer.h"

namespace isometry::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kRun = 1ull << 20;      // bytes per run, like fio's bs=1M
constexpr uint64_t kRequest = 4ull << 20;  // the channel's request_bytes
constexpr int kRepeat = 5;

struct FioResult {
  bool ok = false;
  double bytes_per_s = 0;
  std::string detail;  // the command, or why it failed
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// fio on `file` with the channels' settings. The file is laid out like
// Isometry's: fio's write job sizes a missing file with ftruncate
// (--fallocate=none), as DiskEndpoint::OpenForWrite and the channel rows do,
// so both sides write into the same kind of sparse file. `end_fsync`: fio's
// time includes an fsync at the end, the baseline of a durable write.
FioResult RunFio(const std::string& file, bool write, uint64_t bytes, unsigned depth,
                 bool end_fsync = false) {
  const std::string rw = write ? "write" : "read";
  const std::string cmd =
      StrCat("fio --name=x --filename=", ShellQuote(file), " --rw=", rw, " --bs=1M --size=", bytes,
             " --ioengine=io_uring --direct=1 --iodepth=", depth, " --fallocate=none",
             end_fsync ? " --end_fsync=1" : "", " --output-format=json");
  FILE* pipe = ::popen(("timeout 300 " + cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {false, 0, "cannot start fio"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0) {
    return {false, 0,
            StrCat("'", cmd, "' failed (status ", status,
                   "): ", out.substr(out.size() - std::min<size_t>(out.size(), 200)))};
  }
  // jobs[0].<rw>.bw_bytes, without a JSON library.
  const size_t section = out.find("\"" + rw + "\" : {");
  const size_t key = section == std::string::npos ? section : out.find("\"bw_bytes\" : ", section);
  if (key == std::string::npos) return {false, 0, "no bw_bytes in fio's output"};
  return {true, std::strtod(out.c_str() + key + 13, nullptr), cmd};
}

// Moves `bytes` between `host` (cycled) and the file with requests of four
// 1 MiB runs, max_in_flight at a time. Returns seconds, or nullopt after
// printing the failure.
std::optional<double> RunChannel(Channel& channel, bool write, const FileRange& file,
                                 uint64_t bytes, const HostBuffer& host) {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  Status failure;
  const int depth = std::max(1, channel.caps().max_in_flight);
  const auto t0 = Clock::now();
  std::unique_lock lock(mu);
  for (uint64_t off = 0; off < bytes && failure.ok(); off += kRequest) {
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
    cv.wait(lock, [&] { return in_flight < depth; });
    ++in_flight;
    lock.unlock();
    channel.Submit(std::move(req), [&](Status s) {
      std::lock_guard l(mu);
      --in_flight;
      if (!s.ok() && failure.ok()) failure = s;
      cv.notify_all();
    });
    lock.lock();
  }
  cv.wait(lock, [&] { return in_flight == 0; });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!failure.ok()) {
    std::fprintf(stderr, "disk bench: %s\n", failure.ToString().c_str());
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
    std::exit(1);
  }
  std::fprintf(stderr, "  %s\n", DescribeDiskChannel(**ch).c_str());
  return *std::move(ch);
}

void KeepBest(FioResult& best, const FioResult& f) {
  if (f.ok && (!best.ok || f.bytes_per_s > best.bytes_per_s)) best = f;
  if (!f.ok && !best.ok) best = f;
}

std::string FioBaseline(bool write, bool direct, bool end_fsync = false) {
  return StrCat("fio io_uring ", write ? "write" : "read", " QD", kDefaultQueueDepth,
                direct ? " direct" : "", end_fsync ? " +fsync" : "");
}

// ---- Runtime level: the same I/O as a user's Copy() to and from a file ----

// The default memories and Memcpy channel plus DSK memory `dsk0` on `dir`
// and disk channels with the Memcpy channel's settings (4 MiB requests, so
// 1-hop chunks are the channel scenario's requests). The space threshold
// and ring depth stay at their defaults: the ring buffers of a converting
// write are the ones a user gets.
RuntimeConfig DiskRuntimeConfig(const std::string& dir) {
  RuntimeConfig c = DefaultRuntimeConfig();
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
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "disk bench: %s: %s\n", what, s.ToString().c_str());
    return std::nullopt;
  }
  return seconds;
}

// Seconds of fdatasync(path) plus fsync(dir), or nullopt (printed).
std::optional<double> TimedSync(const std::string& path, const std::string& dir) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  std::optional<double> out;
  if (fd >= 0 && dfd >= 0) {
    const auto t0 = Clock::now();
    if (::fdatasync(fd) == 0 && ::fsync(dfd) == 0)
      out = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (!out)
    std::fprintf(stderr, "disk bench: syncing %s: %s\n", path.c_str(), std::strerror(errno));
  if (fd >= 0) ::close(fd);
  if (dfd >= 0) ::close(dfd);
  return out;
}

// The shortest time seen (the detail lines printed besides the medians).
struct Best {
  double seconds = 1e300;
  void Add(double s) { seconds = std::min(seconds, s); }
};

// DSK->SYS and SYS->DSK of `bytes` through the Runtime against fio, and an
// AOS (SYS) -> SOA (file) write pipelined in one Copy against staged
// (convert all into SYS, then write). `repeat` rounds, each running every
// runtime case once and fio once, in alternating order; the rows are the
// rounds' medians. Removes its files.
void RunDiskRuntime(const std::string& dir, uint64_t bytes, int repeat, bool direct,
                    Report& report) {
  auto created = Runtime::Create(DiskRuntimeConfig(dir));
  if (!created.ok()) {
    std::fprintf(stderr, "disk bench: runtime: %s\n", created.status().ToString().c_str());
    return;
  }
  Runtime& rt = **created;
  const MemoryId sys = *rt.FindMemory("sys0"), dsk = *rt.FindMemory("dsk0");
  const std::string plain_name = StrCat("isometry-bench-rt-", ::getpid(), ".bin");
  const std::string soa_name = StrCat("isometry-bench-soa-", ::getpid(), ".bin");
  const std::string dd_name = StrCat("isometry-bench-dd-", ::getpid(), ".bin");
  const std::string dd_path = StrCat(dir, "/", dd_name);
  const std::string plain_path = StrCat(dir, "/", plain_name);
  const std::string soa_path = StrCat(dir, "/", soa_name);
  const std::string fio_path = StrCat(dir, "/isometry-bench-rt-fio-", ::getpid(), ".bin");
  auto remove_files = [&] {
    for (const std::string* p : {&plain_path, &soa_path, &fio_path, &dd_path}) ::unlink(p->c_str());
  };

  // Plain: a contiguous 1-D instance of 8-byte entries. Converting: 8 fields
  // of 4 bytes, AOS in SYS, SOA in the file (the file system's 4 KiB
  // alignment holds: bytes is a multiple of 1 MiB, so each SOA field is too).
  const InstanceShape plain{Box::FromExtents({static_cast<int64_t>(bytes / 8)}),
                            FieldSpace::Uniform(1, 8), Layout::Aos(1)};
  const int64_t n = static_cast<int64_t>(bytes / 32);
  const uint64_t aos_bytes = static_cast<uint64_t>(n) * 32;
  const InstanceShape aos{Box::FromExtents({n}), FieldSpace::Uniform(8, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  // DSK -> DSK: the plain file read as a 16 x (bytes / 128) matrix of
  // 8-byte values, written transposed (F,x,y -> F,y,x: rows become columns).
  const InstanceShape rows{Box::FromExtents({16, static_cast<int64_t>(bytes / 128)}),
                           FieldSpace::Uniform(1, 8), *Layout::Parse("F,x,y", 2)};
  const InstanceShape cols{rows.bounds, rows.fields, *Layout::Parse("F,y,x", 2)};
  // `a`: the source of every write (word k holds k, so AOS entry i field f
  // holds 8i + f). `b`: the read destination and the staged SOA buffer.
  HostBuffer a(bytes, 0), b(bytes, 0);
  {
    uint32_t* w = reinterpret_cast<uint32_t*>(a.data());
    for (uint64_t k = 0; k < bytes / 4; ++k) w[k] = static_cast<uint32_t>(k);
  }
  auto host = [&](const HostBuffer& buf, const InstanceShape& s) {
    return InstanceRef{sys, buf.data(), buf.size(), s};
  };
  auto file = [&](const std::string& name, const InstanceShape& s) {
    InstanceRef r;
    r.memory = dsk;
    r.shape = s;
    r.file = name;
    return r;
  };
  // True when `b` holds the SOA form of `a`.
  auto soa_ok = [&] {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(b.data());
    for (int64_t f = 0; f < 8; ++f)
      for (int64_t i = 0; i < n; ++i)
        if (w[f * n + i] != static_cast<uint32_t>(8 * i + f)) return false;
    return true;
  };

  Best write, fsync_cost, staged_convert, staged_write;
  // The last round's times, for the per-round pairs.
  double last_write = 0, last_nosync = 0, last_read = 0, last_pipelined = 0, last_staged = 0;
  double last_dd = 0;
  // write (no fsync), read, write ending with fsync (the durable baseline).
  FioResult fio[3];
  double fio_round[3] = {};
  auto with_fio = [&] {
    ::unlink(fio_path.c_str());
    for (int i : {2, 0, 1}) {  // the read reads the last write's file
      const FioResult f = RunFio(fio_path, i != 1, bytes, kDefaultQueueDepth, i == 2);
      fio_round[i] = f.ok ? f.bytes_per_s / 1e9 : 0;
      KeepBest(fio[i], f);
      if (i == 2) ::unlink(fio_path.c_str());
    }
  };
  auto runtime = [&](bool first) -> bool {
    ::unlink(plain_path.c_str());  // the rename would free the old file's blocks in the timing
    auto s = TimedCopy(rt, {.src = host(a, plain), .dst = file(plain_name, plain)}, "SYS->DSK");
    if (!s) return false;
    write.Add(*s);
    last_write = *s;
    std::memset(b.data(), 0, b.size());
    s = TimedCopy(rt, {.src = file(plain_name, plain), .dst = host(b, plain)}, "DSK->SYS");
    if (!s) return false;
    last_read = *s;
    if (first && std::memcmp(a.data(), b.data(), bytes) != 0) {
      std::fprintf(stderr, "disk bench: DSK->SYS read back other bytes than SYS->DSK wrote\n");
      return false;
    }
    ::unlink(dd_path.c_str());
    s = TimedCopy(rt, {.src = file(plain_name, rows), .dst = file(dd_name, cols)}, "DSK->DSK");
    if (!s) return false;
    last_dd = *s;
    if (first) {  // row x of the source is column x of the copy
      std::memset(b.data(), 0, b.size());
      if (!TimedCopy(rt, {.src = file(dd_name, cols), .dst = host(b, cols)}, "DSK->DSK check")) {
        return false;
      }
      const uint64_t n_cols = bytes / 128;
      for (uint64_t x = 0; x < 16; ++x)
        for (uint64_t y = 0; y < n_cols; y += 4099)
          if (std::memcmp(b.data() + 8 * (x * n_cols + y), a.data() + 8 * (y * 16 + x), 8) != 0) {
            std::fprintf(stderr, "disk bench: DSK->DSK transpose differs at (%llu, %llu)\n",
                         static_cast<unsigned long long>(x), static_cast<unsigned long long>(y));
            return false;
          }
    }
    ::unlink(dd_path.c_str());
    ::unlink(plain_path.c_str());
    s = TimedCopy(rt, {.src = host(a, plain), .dst = file(plain_name, plain), .durable = false},
                  "SYS->DSK (durable=false)");
    if (!s) return false;
    last_nosync = *s;
    // What durable=true adds, measured directly: the data went out with
    // O_DIRECT, so this is the file's metadata, the device cache flush and
    // the directory (DiskEndpoint::Commit syncs both).
    if (const auto sync = TimedSync(plain_path, dir)) fsync_cost.Add(*sync);

    ::unlink(soa_path.c_str());
    s = TimedCopy(rt, {.src = host(a, aos), .dst = file(soa_name, soa)}, "AOS->SOA file");
    if (!s) return false;
    last_pipelined = *s;
    if (first) {
      std::memset(b.data(), 0, b.size());
      if (!TimedCopy(rt, {.src = file(soa_name, soa), .dst = host(b, soa)}, "SOA file read")) {
        return false;
      }
      if (!soa_ok()) {
        std::fprintf(stderr, "disk bench: the AOS->SOA file does not hold the SOA of the source\n");
        return false;
      }
    }
    ::unlink(soa_path.c_str());
    const auto convert = TimedCopy(rt, {.src = host(a, aos), .dst = host(b, soa)}, "AOS->SOA");
    if (!convert) return false;
    s = TimedCopy(rt, {.src = host(b, soa), .dst = file(soa_name, soa)}, "SOA->file");
    if (!s) return false;
    last_staged = *convert + *s;
    staged_convert.Add(*convert);
    staged_write.Add(*s);
    return true;
  };
  Rounds read_rounds, write_rounds, nosync_rounds, convert_rounds, staged_rounds, dd_rounds;
  const double gb = static_cast<double>(bytes) / 1e9;
  for (int rep = 0; rep < repeat; ++rep) {
    if (rep % 2) with_fio();
    if (!runtime(rep == 0)) {
      remove_files();
      return;
    }
    if (rep % 2 == 0) with_fio();
    read_rounds.Add(gb / last_read, fio_round[1]);
    write_rounds.Add(gb / last_write, fio_round[2]);
    nosync_rounds.Add(gb / last_nosync, fio_round[0]);
    const double aos_gb = static_cast<double>(aos_bytes) / 1e9;
    convert_rounds.Add(aos_gb / last_pipelined, gb / last_write);
    staged_rounds.Add(aos_gb / last_pipelined, aos_gb / last_staged);
    dd_rounds.Add(gb / last_dd, gb / (last_read + last_write));
  }
  remove_files();
  read_rounds.Print("runtime DSK->SYS vs fio read");
  write_rounds.Print("runtime SYS->DSK (durable) vs fio write + end_fsync");
  nosync_rounds.Print("runtime SYS->DSK (durable=false) vs fio write");
  convert_rounds.Print("AOS->SOA file vs plain durable write");
  staged_rounds.Print("AOS->SOA file pipelined vs staged");
  dd_rounds.Print("DSK->DSK transposed vs DSK->SYS read + SYS->DSK write of the same bytes");

  const double sync_ms = fsync_cost.seconds < 1e300 ? fsync_cost.seconds * 1e3 : -1;
  std::fprintf(stderr,
               "  runtime SYS->DSK: best %.1f ms durable; fdatasync + directory fsync of the "
               "written file: %.1f ms (%.1f%% of the durable write)%s\n",
               write.seconds * 1e3, sync_ms, 100 * sync_ms / (write.seconds * 1e3),
               sync_ms > 0.5 * write.seconds * 1e3 ? ": fdatasync dominates" : "");
  std::fprintf(stderr, "  staged AOS->SOA (best of each): convert %.1f ms, write %.1f ms\n",
               staged_convert.seconds * 1e3, staged_write.seconds * 1e3);
  if (fio[0].ok && fio[1].ok && fio[2].ok) {
    report.Add(MedianRow("disk_read_runtime", "throughput", read_rounds, FioBaseline(false, direct),
                         ">= 0.9"));
    report.Add(MedianRow("disk_write_runtime", "throughput", write_rounds,
                         FioBaseline(true, direct, true), ">= 0.9"));
    report.Add(MedianRow("disk_write_runtime", "durable=false", nosync_rounds,
                         FioBaseline(true, direct), ""));
  } else {
    for (const FioResult& f : fio)
      if (!f.ok) std::fprintf(stderr, "  fio unavailable: %s\n", f.detail.c_str());
  }
  if (sync_ms >= 0) {
    report.Add({"disk_write_runtime", "fdatasync", sync_ms, "ms", "the whole durable write",
                write.seconds * 1e3, sync_ms / (write.seconds * 1e3), "report"});
  }
  report.Add(MedianRow("aos_to_soa_to_disk", "throughput", staged_rounds,
                       "staged (convert all, then write)", ""));
  report.Add(MedianRow("aos_to_soa_to_disk", "vs_plain_write", convert_rounds,
                       "plain durable write (disk_write_runtime)", ">= 0.9"));
  report.Add(MedianRow("dsk_to_dsk_transpose", "throughput", dd_rounds,
                       "read into SYS, then durable write (same bytes)", ">= 0.9"));
}

}  // namespace

void RunDisk(const std::string& dir, uint64_t bytes, Report& report, int repeat) {
  bytes = std::max(kRun, bytes / kRun * kRun);
  const std::string path = StrCat(dir, "/isometry-bench-disk-", ::getpid(), ".bin");
  auto writer = MakeOrDie(ChannelKind::kDiskWrite, "dsk_w");
  auto reader = MakeOrDie(ChannelKind::kDiskRead, "dsk_r");
  // Host memory like fio's: one buffer per request in flight, reused (fio
  // allocates iodepth x bs). Cycling through a larger buffer measures the
  // host's page pinning and TLB as much as the disk: 64 MiB cost ~15% on
  // the development VM.
  const uint64_t host_bytes =
      static_cast<uint64_t>(std::max(1, writer->caps().max_in_flight)) * kRequest;
  const HostBuffer host(std::min(bytes, host_bytes), 7);
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
        std::fprintf(stderr, "disk bench: ftruncate %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
      }
      const auto s = RunChannel(write ? *writer : *reader, write, file->Ref(), bytes, host);
      if (!s) return false;
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
  Rounds rounds[2];
  const double gb = static_cast<double>(bytes) / 1e9;
  for (int rep = 0; rep < kRepeat; ++rep) {
    if (rep % 2) with_fio();
    if (!channels()) {
      ::unlink(path.c_str());
      return;
    }
    if (rep % 2 == 0) with_fio();
    for (int i : {0, 1}) rounds[i].Add(gb / ours_round[i], fio_round[i]);
  }
  ::unlink(path.c_str());
  rounds[0].Print("channel write vs fio write");
  rounds[1].Print("channel read vs fio read");

  for (const bool write : {true, false}) {
    const FioResult& f = fio[!write];
    if (!f.ok) {
      std::fprintf(stderr, "  fio unavailable: %s\n", f.detail.c_str());
      continue;
    }
    report.Add(MedianRow(write ? "disk_write_1MiB" : "disk_read_1MiB", "throughput", rounds[!write],
                         FioBaseline(write, direct), ">= 0.9"));
  }
  if (!direct)
    std::fprintf(stderr, "  note: %s has no O_DIRECT; the channel used the page cache\n",
                 dir.c_str());

  RunDiskRuntime(dir, bytes, std::max(kRepeat, repeat), direct, report);
}

}  // namespace isometry::bench
