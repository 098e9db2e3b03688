// DiskRead / DiskWrite channels when things go wrong: short transfers and
// -EAGAIN, an injected EIO at every position, ENOSPC on a tmpfs of our own,
// a file shorter than the instance, permission denied, missing files and
// bad descriptors (each with its message checked and the channel serving
// afterwards), and a rate cap whose destructor finishes queued work.
#include <fcntl.h>
#include <liburing.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "channels/channel_factory.h"
#include "channels/disk/disk_channel.h"
#include "channels/disk/disk_file.h"
#include "channels/disk/uring.h"
#include "core/strings.h"
#include "layout/compiler.h"
#include "unit/disk_test_support.h"
#include "unit/skip.h"
#include "unit/temp_dir.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using namespace std::chrono_literals;

namespace fs = std::filesystem;

TEST_CASE("short transfers are resubmitted and -EAGAIN is retried") {
  TempDir dir;
  IoLog log;
  std::atomic<int> shortened{0}, again{0};
  log.rewrite = [&](const DiskIoEvent& e) {
    if (e.sequence % 3 == 0) {
      ++again;
      return -EAGAIN;
    }
    if (e.result > 5000) {  // the kernel did more; we claim less: the rest is redone
      ++shortened;
      return 4096 + (e.result % 4096 == 0 ? 0 : 13);
    }
    return e.result;
  };
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w", {.io_hook = log.Hook()});
  auto r = MakeDisk(ChannelKind::kDiskRead, "r", {.io_hook = log.Hook()});
  auto file = DiskFile::Open(dir.File("short.bin"), DiskFile::Mode::kUpdate);
  REQUIRE(file.ok());
  const uint64_t size = (2ull << 20) + 1234;
  const auto data = Pattern(size, 5);
  HostBuffer src(size), dst(size, 24);
  src.Fill(data);
  REQUIRE(Write(*w, file->Ref(333), src.data(), ContiguousProgram(size)).ok());
  REQUIRE(Read(*r, file->Ref(333), dst.data(), ContiguousProgram(size)).ok());
  CHECK(dst.Vector() == data);
  CHECK(shortened > 10);
  CHECK(again > 10);
}

TEST_CASE(
    "an injected I/O error at any position fails the request, frees staging, and the channel "
    "serves on") {
  TempDir dir;
  // Per channel: fails the I/O numbered fail_at, remembers it.
  struct Fault {
    std::atomic<uint64_t> fail_at{~0ull}, last{~0ull};  // last + 1 wraps to I/O 0
    DiskIoEvent failed{};
    DiskIoHook Hook() {
      return [this](const DiskIoEvent& e) {
        last = e.sequence;
        if (e.sequence != fail_at) return e.result;
        failed = e;
        return -EIO;
      };
    }
  } wf, rf;
  // Staging of exactly 2 MiB: a request that needs all of it only starts if
  // every failed request gave back what it held.
  auto w =
      MakeDisk(ChannelKind::kDiskWrite, "w", {.staging_bytes = 2ull << 20, .io_hook = wf.Hook()});
  auto r =
      MakeDisk(ChannelKind::kDiskRead, "r", {.staging_bytes = 2ull << 20, .io_hook = rf.Hook()});
  const std::string path = dir.File("faulty.bin");
  auto file = DiskFile::Open(path, DiskFile::Mode::kUpdate);
  REQUIRE(file.ok());

  const InstanceShape aos{Box::FromExtents({131072}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  REQUIRE(aos.total_bytes() == 2ull << 20);
  const auto full_staging_read = Compile(aos, soa, aos.bounds);
  const auto full_staging_write = Compile(soa, aos, aos.bounds);
  HostBuffer soa_mem(soa.total_bytes());
  soa_mem.Fill(Pattern(soa.total_bytes(), 3));

  const uint64_t size = (3ull << 20) + 5;
  HostBuffer host(size, 8);  // misaligned: the aligned body is bounced through staging
  host.Fill(Pattern(size, 4));
  struct Shape {
    const char* name;
    std::shared_ptr<const CopyProgram> program;
    std::byte* host;
    uint64_t offset;
  };
  for (const Shape& shape : {Shape{"bounced contiguous", ContiguousProgram(size), host.data(), 100},
                             Shape{"staged AOS<->SOA", nullptr, soa_mem.data(), 4096}}) {
    for (const bool writing : {true, false}) {
      Channel& ch = writing ? *w : *r;
      Fault& fault = writing ? wf : rf;
      for (uint64_t k = 0;; ++k) {
        auto program =
            shape.program ? shape.program : (writing ? full_staging_write : full_staging_read);
        fault.fail_at = fault.last + 1 + k;
        const FileRange ref = file->Ref(shape.offset);
        const Status s =
            writing ? Write(ch, ref, shape.host, program) : Read(ch, ref, shape.host, program);
        if (s.ok()) {  // k passed the number of I/Os the request makes
          CHECK(k >= 2);
          break;
        }
        INFO(shape.name << (writing ? " write" : " read") << ", I/O " << k);
        CHECK(s.code() == absl::StatusCode::kUnknown);  // absl's code for EIO
        CHECK(Message(s) == StrCat(writing ? "disk_write 'w': " : "disk_read 'r': ", path,
                                   " at offset ", fault.failed.file_offset, " (+",
                                   fault.failed.length, "): Input/output error"));
        fault.fail_at = ~0ull;
        // All staging is free again, and the channel still works.
        const Status next = writing ? Write(ch, file->Ref(0), soa_mem.data(), full_staging_write)
                                    : Read(ch, file->Ref(0), soa_mem.data(), full_staging_read);
        CHECK(next.ok());
      }
    }
  }
}

TEST_CASE("ENOSPC on a full tmpfs names the file, and the channel serves on",
          "[may_skip][tmpfs_enospc]") {
  TempDir dir;
  const fs::path mnt = fs::path(dir.path) / "small";
  fs::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0) {
    ISOMETRY_SKIP("cannot mount a 256 KiB tmpfs at " << mnt << ": " << ErrnoString(errno)
                                                     << " (needs root / CAP_SYS_ADMIN)");
  }
  struct Unmount {
    const fs::path& p;
    ~Unmount() {
      if (::umount(p.c_str()) != 0) ::umount2(p.c_str(), MNT_DETACH);
    }
  } unmount{mnt};
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w");
  const uint64_t size = 1ull << 20;
  HostBuffer src(size);
  src.Fill(Pattern(size, 9));
  for (const bool use_direct : {true, false}) {
    const std::string path = (mnt / StrCat("big", use_direct)).string();
    Status s;
    {
      auto file = DiskFile::Open(path, DiskFile::Mode::kWrite);
      REQUIRE(file.ok());
      FileRange ref = file->Ref(0);
      if (!use_direct) ref.direct_fd = -1;
      s = Write(*w, ref, src.data(), ContiguousProgram(size));
    }
    INFO(s.ToString());
    CHECK(s.code() == absl::StatusCode::kResourceExhausted);
    CHECK(Message(s).find(StrCat("disk_write 'w': ", path, " at offset ")) == 0);
    CHECK(Message(s).find("): No space left on device") != std::string::npos);
    fs::remove(path);
  }
  // Still serving: a small write on the same tmpfs, and one elsewhere.
  auto file = DiskFile::Open((mnt / "small").string(), DiskFile::Mode::kWrite);
  REQUIRE(file.ok());
  CHECK(Write(*w, file->Ref(100), src.data(), ContiguousProgram(20000)).ok());
  auto other = DiskFile::Open(dir.File("other"), DiskFile::Mode::kWrite);
  REQUIRE(other.ok());
  CHECK(Write(*w, other->Ref(0), src.data(), ContiguousProgram(size)).ok());
}

TEST_CASE("a file shorter than the instance fails the read with the path and where") {
  TempDir dir;
  auto r = MakeDisk(ChannelKind::kDiskRead, "r");
  const std::string path = dir.File("short.bin");
  WriteAt(path, Pattern(10000, 1), 0);
  auto file = DiskFile::Open(path, DiskFile::Mode::kRead);
  REQUIRE(file.ok());
  HostBuffer dst(1 << 20);
  for (const bool use_direct : {true, false}) {
    FileRange ref = file->Ref(0);
    if (!use_direct) ref.direct_fd = -1;
    const Status s = Read(*r, ref, dst.data(), ContiguousProgram(20000));
    INFO(s.ToString());
    CHECK(s.code() == absl::StatusCode::kOutOfRange);
    CHECK(Message(s).find(StrCat("disk_read 'r': ", path, " at offset ")) == 0);
    CHECK(Message(s).find("end of file (the file is shorter than the instance)") !=
          std::string::npos);
  }
  // Staged (small runs): the file ends inside the staged range; a shape
  // that just fits is fine.
  const InstanceShape too_long{Box::FromExtents({1000}), FieldSpace::Uniform(3, 4), Layout::Aos(1)};
  const InstanceShape fits{Box::FromExtents({800}), FieldSpace::Uniform(3, 4), Layout::Aos(1)};
  auto soa = [](InstanceShape s) {
    s.layout = Layout::Soa(1);
    return s;
  };
  const Status s =
      Read(*r, file->Ref(0), dst.data(), Compile(too_long, soa(too_long), too_long.bounds));
  CHECK(s.code() == absl::StatusCode::kOutOfRange);
  CHECK(Message(s).find("shorter than the instance") != std::string::npos);
  CHECK(Read(*r, file->Ref(10000 - fits.total_bytes()), dst.data(),
             Compile(fits, soa(fits), fits.bounds))
            .ok());
  CHECK(Read(*r, file->Ref(0), dst.data(), ContiguousProgram(10000)).ok());
}

TEST_CASE("permission denied is reported with the path", "[may_skip][permission_denied]") {
  TempDir dir;
  const std::string path = dir.File("secret");
  WriteAt(path, Pattern(100, 1), 0);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  // Root passes permission checks; a file-system uid of nobody (per
  // thread, and it drops CAP_DAC_OVERRIDE) does not.
  const int before = ::setfsuid(65534);
  auto file = DiskFile::Open(path, DiskFile::Mode::kRead);
  ::setfsuid(static_cast<uid_t>(before));
  if (::geteuid() != 0 && file.ok()) {
    ISOMETRY_SKIP("running as uid " << ::geteuid() << " that owns the file (needs root)");
  }
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(Message(file.status()) == StrCat("open ", path, ": Permission denied"));
}

TEST_CASE("missing files and bad descriptors are reported with the path") {
  TempDir dir;
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w");
  auto r = MakeDisk(ChannelKind::kDiskRead, "r");
  HostBuffer buf(65536);
  buf.Fill(Pattern(65536, 2));

  SECTION("missing file") {
    const std::string path = dir.File("no/such/file");
    auto file = DiskFile::Open(path, DiskFile::Mode::kRead);
    REQUIRE_FALSE(file.ok());
    CHECK(file.status().code() == absl::StatusCode::kNotFound);
    CHECK(Message(file.status()) == StrCat("open ", path, ": No such file or directory"));
    // A request whose file the caller could not open.
    const Status s = Read(*r, FileRange{.path = path}, buf.data(), ContiguousProgram(100));
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(Message(s) ==
          StrCat("disk_read 'r': request without an open source file ('", path, "')"));
  }
  SECTION("writing through a read-only descriptor") {
    const std::string path = dir.File("ro");
    WriteAt(path, Pattern(8192, 1), 0);
    auto file = DiskFile::Open(path, DiskFile::Mode::kRead);
    REQUIRE(file.ok());
    const Status s = Write(*w, file->Ref(4096), buf.data(), ContiguousProgram(4096));
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);  // EBADF
    CHECK(Message(s) ==
          StrCat("disk_write 'w': ", path, " at offset 4096 (+4096): Bad file descriptor"));
  }
  SECTION("reading a directory") {
    auto file = DiskFile::Open(dir.path, DiskFile::Mode::kRead);
    REQUIRE(file.ok());
    const Status s = Read(*r, file->Ref(0), buf.data(), ContiguousProgram(100));
    CHECK(Message(s) == StrCat("disk_read 'r': ", dir.path, " at offset 0 (+100): Is a directory"));
  }
  // Whatever failed, both channels still serve.
  auto file = DiskFile::Open(dir.File("fine"), DiskFile::Mode::kUpdate);
  REQUIRE(file.ok());
  CHECK(Write(*w, file->Ref(7), buf.data(), ContiguousProgram(65536)).ok());
  HostBuffer back(65536);
  CHECK(Read(*r, file->Ref(7), back.data(), ContiguousProgram(65536)).ok());
  CHECK(back.Vector() == buf.Vector());
  CHECK(SyncFile(file->Ref()).ok());
  const Status bad = SyncFile(FileRange{.path = "/nowhere"});
  CHECK(Message(bad) == "fdatasync /nowhere: Bad file descriptor");
}

TEST_CASE("a rate-capped disk channel paces requests; the destructor finishes queued work") {
  TempDir dir;
  auto file = DiskFile::Open(dir.File("paced"), DiskFile::Mode::kUpdate);
  REQUIRE(file.ok());
  HostBuffer src(1 << 20);
  src.Fill(Pattern(1 << 20, 1));
  ChannelConfig c;
  c.name = "paced";
  c.kind = ChannelKind::kDiskWrite;
  c.rate_limit_bytes_per_s = 32ull << 20;
  auto w = MakeDiskChannel(c);
  REQUIRE(w.ok());
  std::atomic<int> ok{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {
    (*w)->Submit({.program = ContiguousProgram(1 << 20),
                  .src = HostBytes{src.data()},
                  .dst = file->Ref(i << 20)},
                 [&](const Status& s) { ok += s.ok(); });
  }
  w->reset();  // waits for all eight
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ok == 8);
  CHECK(took >= 7.0 / 32 * 0.95);  // eight 1 MiB requests at 32 MiB/s: 7 gaps
  CHECK(ReadAt(file->path(), 7 << 20, 1 << 20) == src.Vector());
}

}  // namespace ISOMETRY_TEST_FILE
