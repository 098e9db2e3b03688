// Served reads (docs/guides/client-memory.md, "Served reads") against a real daemon and a real
// publishing process: copies out of a range whose publisher serves reads
// are packed by the publisher in its own process and unpacked here,
// byte for byte what MPI_Pack/MPI_Unpack (core) give, rings of slots
// wrapping included; a small copy of few runs is also read through the
// kernel, timed both ways; a publisher that stops answering is read through the
// kernel instead, one that dies fails the copy; a reader that writes its
// own requests into the window cannot make the publisher read outside the
// ranges it published, nor stall it for good; isometryd refuses a serve
// window no client library makes.
#include "client/cpp/served_read.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "client/cpp/direct_read.h"
#include "client/cpp/isometry_client.h"
#include "client/cpp/timed_choice.h"
#include "core/unique_fd.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "integration/read_pair.h"
#include "integration/stopped_process.h"
#include "integration/worker_process.h"
#include "isometry.pb.h"
#include "layout/copy_program.h"
#include "layout/hop_window.h"
#include "layout/serve_window.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;
using Clock = std::chrono::steady_clock;

namespace {

const Datatype kByte = Datatype::Basic(BasicType::kByte);

// A lane of a publisher's window driven by hand, as a hostile reader of
// the same uid could: the window taken from the lease's pidfd, requests
// written raw.
class RawLane {
 public:
  // Asks a lease for (src, dst) and attaches to the window it names.
  RawLane(Client& c, uint64_t src, uint64_t dst) {
    v1::LocalRequest req;
    req.mutable_direct_read()->set_src_instance(src);
    req.mutable_direct_read()->set_dst_instance(dst);
    std::vector<int> fds;
    Result<v1::LocalResponse> r = c.Request(req, &fds);
    REQUIRE(r.ok());
    REQUIRE(fds.size() == 1);
    UniqueFd pidfd(fds[0]);
    const v1::DirectReadResponse& lease = r->direct_read();
    REQUIRE(lease.has_serve());
    remote_ = lease.remote_address();
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), lease.serve().fd(), 0)));
    REQUIRE(fd.valid());
    void* m = ::mmap(nullptr, serve_window::kWindowBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                     fd.get(), 0);
    REQUIRE(m != MAP_FAILED);
    window_ = static_cast<std::byte*>(m);
    h_ = reinterpret_cast<serve_window::Header*>(window_);
    REQUIRE(serve_window::CheckHeader(*h_, serve_window::kWindowBytes, lease.serve().token()).ok());
    for (uint32_t i = 0; i < serve_window::kLanes && !lane_; ++i) {
      uint64_t free = 0;
      if (h_->lanes_[i].owner.compare_exchange_strong(free, static_cast<uint64_t>(::getpid()))) {
        lane_ = &h_->lanes_[i];
        index_ = i;
      }
    }
    REQUIRE(lane_);
  }
  ~RawLane() {
    lane_->owner.store(0);
    ::munmap(window_, serve_window::kWindowBytes);
  }

  uint64_t remote() const { return remote_; }

  // Posts `records` as a request; returns its sequence number.
  uint32_t Post(const std::string& records, uint64_t ops, uint64_t bytes, uint64_t remote,
                uint64_t piece) {
    std::memcpy(serve_window::ProgramArea(window_, index_), records.data(),
                std::min<uint64_t>(records.size(), serve_window::kProgramBytes));
    serve_window::Request& r = lane_->request;
    r.program_id = ++program_id_;
    r.program_ops = ops;
    r.program_bytes = records.size();
    r.remote_address = remote;
    r.piece_bytes = piece;
    r.bytes = bytes;
    const uint32_t seq = r.seq.load() + 1;
    r.seq.store(seq);
    h_->doorbell.value.fetch_add(1);
    serve_window::Wake(h_->doorbell.value);
    return seq;
  }
  // Waits up to `limit` for the publisher to end request `seq`; its code.
  std::optional<uint32_t> Ended(uint32_t seq, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (lane_->progress.finished.load() != seq) {
      if (Clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return lane_->progress.result.load();
  }
  // Pieces packed for request `seq`.
  uint32_t produced(uint32_t seq) const {
    return serve_window::CountFor(lane_->progress.produced.load(), seq);
  }

 private:
  std::byte* window_ = nullptr;
  serve_window::Header* h_ = nullptr;
  serve_window::Lane* lane_ = nullptr;
  uint32_t index_ = 0;
  uint64_t remote_ = 0;
  uint64_t program_id_ = 1000;
};

std::string Records(const CopyProgram& p) {
  std::string out(hop_window::EncodedBytes(p), '\0');
  REQUIRE(hop_window::EncodeProgram(p, reinterpret_cast<std::byte*>(out.data()), out.size()));
  return out;
}

}  // namespace

// The publisher refuses pieces larger than a slot (every copy would then
// read through the kernel): the reader's cut must fit one for any size.
TEST_CASE("the reader cuts every copy into pieces that fit a slot") {
  for (uint64_t bytes = 1; bytes <= (uint64_t{1} << 40); bytes = bytes * 3 + 1) {
    INFO(bytes);
    const uint64_t piece = client::PieceBytesFor(bytes);
    CHECK(piece >= (8 << 10));
    CHECK(piece <= serve_window::kSlotBytes);
    CHECK(piece % 4096 == 0);
    // A copy of 8 pieces or more has pieces of an eighth, up to 128 KiB.
    if (bytes >= (64 << 10)) {
      CHECK(piece == std::min<uint64_t>((bytes / 8 + 4095) / 4096 * 4096, 128 << 10));
    }
  }
}

TEST_CASE("copies out of a publisher that serves reads run through its window, verified") {
  const uint64_t bytes = 8 << 20;
  ReadPair pair(bytes, 61, "served");
  auto& [d, other, c, mine, other0] = pair;
  const std::vector<int64_t> lens{3, 1, 4}, disps{-8, 0, 5};
  const Datatype idx = Ok(Datatype::Indexed(lens, disps, Datatype::Basic(BasicType::kInt64)));
  const Datatype small = Ok(Datatype::Hvector(16384, 8, 24, kByte));
  struct Case {
    const char* name;
    Datatype src;
    uint64_t src_offset;
    Datatype dst;
    int64_t dst_count;
    uint64_t dst_offset;
  };
  const std::vector<Case> cases = {
      {"8 B blocks into an indexed type", small, 128, idx, small.size() / idx.size(), 4096},
      // 3 MiB packed: more pieces than the lane has slots, so the ring wraps.
      {"3 MiB of 1 KiB blocks", Ok(Datatype::Hvector(3072, 1024, 2048, kByte)), 64,
       Ok(Datatype::Hvector(3072, 1024, 1536, kByte)), 1, 100},
      {"one contiguous run", Ok(Datatype::Contiguous(5 << 20, kByte)), 3, kByte, 5 << 20, 1},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    auto theirs = c->RegisterPrivateInstance(other.range(), k.src_offset, Elements{k.src, 1, 0});
    auto ours = c->Register(mine.range, k.dst_offset, Elements{k.dst, k.dst_count, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    const uint64_t served0 = c->served_reads_run(), direct0 = c->direct_reads_run();
    // Every copy goes through the window, each checked on a destination
    // wiped before it.
    for (int i = 0; i < 3; ++i) {
      std::fill(mine.bytes.begin(), mine.bytes.end(), 0xA5);
      const std::vector<uint8_t> wiped = mine.bytes;
      const client::Completion done = c->Copy(*theirs, *ours);
      REQUIRE(done.status.ok());
      CHECK(done.transfer == 0);
      CHECK(mine.bytes == Expected(other0, static_cast<int64_t>(k.src_offset), k.src, 1, wiped,
                                   static_cast<int64_t>(k.dst_offset), k.dst, k.dst_count));
      CHECK(c->served_reads_run() == served0 + i + 1);
    }
    CHECK(c->direct_reads_run() == direct0 + 3);
  }
  // The publisher packed pieces both ways (it times each before it keeps
  // the faster, client/cpp/pack_chooser.h), and every copy above was
  // verified whichever way its pieces went.
  const auto [staged, direct] = other.PackedPieces();
  CHECK(staged > 0);
  CHECK(direct > 0);

  // A reader that turned served reads off reads the same bytes through
  // the kernel.
  auto off = Client::Connect(
      {.local_socket = d.local_socket(), .name = "kernel-reads", .served_reads = false});
  REQUIRE(off.ok());
  Mine mine2 = RegisterMine(**off, bytes, 63);
  auto theirs = (*off)->RegisterPrivateInstance(other.range(), 0, Elements{small, 1, 0});
  auto ours = (*off)->Register(mine2.range, 0, Elements{small, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  const std::vector<uint8_t> before2 = mine2.bytes;
  REQUIRE((*off)->Copy(*theirs, *ours).status.ok());
  CHECK((*off)->direct_reads_run() == 1);
  CHECK((*off)->served_reads_run() == 0);
  CHECK(mine2.bytes == Expected(other0, 0, small, 1, before2, 0, small, 1));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a small copy of few runs is read both ways, timed, every copy verified") {
  ReadPair pair(1 << 20, 67, "few-runs");
  auto& [d, other, c, mine, other0] = pair;
  // MILC's face: 8 runs of 1.5 KiB, 12 KiB apart (client/cpp/direct_read.h,
  // ReadWays); and a type of more runs than are timed, always served.
  const Datatype few = Ok(Datatype::Hvector(8, 1536, 12288, kByte));
  const Datatype many = Ok(Datatype::Hvector(client::kTimedReadRuns + 1, 64, 128, kByte));
  for (const auto& [type, timed] : {std::pair{few, true}, std::pair{many, false}}) {
    INFO("timed " << timed);
    auto theirs = c->RegisterPrivateInstance(other.range(), 16, Elements{type, 1, 0});
    auto ours = c->Register(mine.range, 32, Elements{type, 1, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    const uint64_t served0 = c->served_reads_run(), direct0 = c->direct_reads_run();
    const int copies = 20;
    for (int i = 0; i < copies; ++i) {
      std::fill(mine.bytes.begin(), mine.bytes.end(), static_cast<uint8_t>(i));
      const std::vector<uint8_t> wiped = mine.bytes;
      REQUIRE(c->Copy(*theirs, *ours).status.ok());
      CHECK(mine.bytes == Expected(other0, 16, type, 1, wiped, 32, type, 1));
    }
    CHECK(c->direct_reads_run() == direct0 + copies);
    const uint64_t served = c->served_reads_run() - served0;
    if (timed) {
      // Each way ran at least its seed copies before the faster was kept.
      CHECK(served >= client::TimedChoice::kSeed);
      CHECK(served <= copies - client::TimedChoice::kSeed);
    } else {
      CHECK(served == copies);
    }
  }
  CHECK(d.Stop() == 0);
}

TEST_CASE(
    "tiny runs over a large extent: served for a reader that uses windows, else copied by the "
    "daemon") {
  Daemon d(kDatatypeChannels);
  const uint64_t bytes = 40 << 20;
  Worker other(d, bytes, 65);
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  // 65536 runs of 4 bytes, 600 apart: 37.5 MiB of extent for 256 KiB,
  // past what the daemon leases for a read through the kernel (32 MiB, and
  // runs that cost more than reading the extent).
  const Datatype sparse = Ok(Datatype::Hvector(65536, 4, 600, kByte));
  const Datatype packed = Ok(Datatype::Contiguous(int64_t{65536} * 4, kByte));
  for (const bool served : {true, false}) {
    INFO("served_reads " << served);
    auto c = Client::Connect(
        {.local_socket = d.local_socket(), .name = "sparse", .served_reads = served});
    REQUIRE(c.ok());
    Mine mine = RegisterMine(**c, 1 << 18, 66);
    auto theirs = (*c)->RegisterPrivateInstance(other.range(), 0, Elements{sparse, 1, 0});
    auto ours = (*c)->Register(mine.range, 0, Elements{packed, 1, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    const std::vector<uint8_t> before = mine.bytes;
    const client::Completion done = (*c)->Copy(*theirs, *ours);
    REQUIRE(done.status.ok());
    CHECK((*c)->served_reads_run() == (served ? 1 : 0));
    CHECK((done.transfer == 0) == served);  // else the daemon's transfer
    CHECK(mine.bytes == Expected(other0, 0, sparse, 1, before, 0, packed, 1));
  }
  CHECK(d.Stop() == 0);
}

TEST_CASE("a publisher that stops answering is read through the kernel; one that dies fails") {
  Daemon d(kDatatypeChannels);
  const uint64_t bytes = 1 << 20;
  auto c = ConnectTo(d.local_socket(), "served");
  Mine mine = RegisterMine(*c, bytes, 71);
  const Datatype type = Ok(Datatype::Hvector(4096, 64, 128, kByte));
  Worker other(d, bytes, 72);
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  REQUIRE(c->Copy(*theirs, *ours).status.ok());
  REQUIRE(c->served_reads_run() == 1);

  // A new pair: its lease's first copy goes through the window.
  const Datatype type2 = Ok(Datatype::Hvector(2048, 64, 256, kByte));
  auto theirs2 = c->RegisterPrivateInstance(other.range(), 0, Elements{type2, 1, 0});
  auto ours2 = c->Register(mine.range, 0, Elements{type2, 1, 0});
  REQUIRE(theirs2.ok());
  REQUIRE(ours2.ok());
  SECTION("stopped: the copy waits about a second, then reads through the kernel") {
    std::fill(mine.bytes.begin(), mine.bytes.end(), 0);
    StopProcess(other.pid());
    const auto start = Clock::now();
    const client::Completion done = c->Copy(*theirs2, *ours2);
    const auto took = Clock::now() - start;
    ::kill(other.pid(), SIGCONT);
    REQUIRE(done.status.ok());
    CHECK(took > std::chrono::milliseconds(900));  // it did wait for the window
    CHECK(took < std::chrono::seconds(5));
    CHECK(c->served_reads_run() == 1);
    CHECK(c->direct_reads_run() == 2);
    CHECK(mine.bytes == Expected(other0, 0, type2, 1, std::vector<uint8_t>(bytes, 0), 0, type2, 1));
    // Later copies still work (through the kernel: that lane was given up).
    REQUIRE(c->Copy(*theirs, *ours).status.ok());
    CHECK(c->served_reads_run() == 1);
  }
  SECTION("killed mid-copy: NOT_FOUND, promptly") {
    StopProcess(other.pid());
    client::Completion done;
    std::thread copier([&] { done = c->Copy(*theirs2, *ours2); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto killed = Clock::now();
    other.Kill();
    copier.join();
    CHECK(Clock::now() - killed < std::chrono::seconds(3));
    CHECK(absl::IsNotFound(done.status));
  }
  // This client and the daemon go on: a copy between two ranges of its own.
  Mine more = RegisterMine(*c, bytes, 73);
  auto a = c->Register(more.range, 0, Elements{type, 1, 0});
  REQUIRE(a.ok());
  CHECK(c->Copy(*a, *ours).status.ok());
  CHECK(d.Stop() == 0);
}

TEST_CASE(
    "a reader writing its own requests cannot make the publisher read what it does not serve") {
  Daemon d(kDatatypeChannels);
  const uint64_t bytes = 4 << 20;
  Worker other(d, bytes, 81);
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  // The attacker: served reads off in its client, so every lane but the
  // one it takes by hand stays free for the honest reader below.
  auto bad = Client::Connect(
      {.local_socket = d.local_socket(), .name = "attacker", .served_reads = false});
  REQUIRE(bad.ok());
  Mine bad_mine = RegisterMine(**bad, bytes, 82);
  const Datatype whole = Ok(Datatype::Contiguous(static_cast<int64_t>(bytes), kByte));
  auto theirs = (*bad)->RegisterPrivateInstance(other.range(), 0, Elements{whole, 1, 0});
  auto ours = (*bad)->Register(bad_mine.range, 0, Elements{whole, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  RawLane lane(**bad, theirs->id(), ours->id());
  const auto code = [](absl::StatusCode c) { return static_cast<uint32_t>(c); };
  const auto limit = std::chrono::milliseconds(3000);

  // 4 KiB just below the published range, and its last page plus one.
  CopyProgram below = *ContiguousProgram(4096);
  uint32_t seq = lane.Post(Records(below), 1, 4096, lane.remote() - 4096, 4096);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kPermissionDenied));
  CHECK(lane.produced(seq) == 0);
  seq = lane.Post(Records(below), 1, 4096, lane.remote() + bytes - 4095, 4096);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kPermissionDenied));
  // A loop that walks backwards out of the range.
  CopyProgram back;
  CopyOp op;
  op.run_bytes = 8;
  op.num_loops = 1;
  op.loops[0] = {1000, static_cast<uint64_t>(-4096), 8};
  back.ops.push_back(op);
  TallyProgram(back);
  seq = lane.Post(Records(back), 1, back.bytes, lane.remote() + 8192, 4096);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kPermissionDenied));
  // Records that do not decode, a byte count that lies, pieces larger
  // than a slot or empty.
  seq = lane.Post(std::string(100, '\xff'), 3, 4096, lane.remote(), 4096);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kInvalidArgument));
  seq = lane.Post(Records(below), 1, 8192, lane.remote(), 4096);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kInvalidArgument));
  seq = lane.Post(Records(below), 1, 4096, lane.remote(), serve_window::kSlotBytes + 1);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kInvalidArgument));
  seq = lane.Post(Records(below), 1, 4096, lane.remote(), 0);
  CHECK(lane.Ended(seq, limit) == code(absl::StatusCode::kInvalidArgument));
  // A request nobody unpacks (more pieces than slots): the publisher
  // ends it after about two seconds instead of waiting for good.
  const CopyProgram big = *ContiguousProgram(bytes);
  seq = lane.Post(Records(big), 1, bytes, lane.remote(), 64 << 10);
  CHECK(lane.Ended(seq, std::chrono::milliseconds(6000)) ==
        code(absl::StatusCode::kDeadlineExceeded));
  CHECK(lane.produced(seq) == serve_window::kSlots);

  // The publisher still serves an honest reader, byte for byte.
  auto c = ConnectTo(d.local_socket(), "honest");
  Mine mine = RegisterMine(*c, bytes, 83);
  const Datatype type = Ok(Datatype::Hvector(8192, 16, 48, kByte));
  auto src = c->RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  auto dst = c->Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(src.ok());
  REQUIRE(dst.ok());
  const std::vector<uint8_t> mine0 = mine.bytes;
  REQUIRE(c->Copy(*src, *dst).status.ok());
  CHECK(c->served_reads_run() == 1);
  CHECK(mine.bytes == Expected(other0, 0, type, 1, mine0, 0, type, 1));
  CHECK(d.Stop() == 0);
}

TEST_CASE("isometryd refuses a serve window no client library makes") {
  Daemon d(kDatatypeChannels);
  auto c =
      Client::Connect({.local_socket = d.local_socket(), .name = "raw", .serve_published = false});
  REQUIRE(c.ok());
  Mine mine = RegisterMine(**c, 1 << 16, 91);
  const auto publish = [&](int fd, uint64_t bytes, uint64_t token) {
    v1::LocalRequest req;
    req.mutable_publish_private()->set_private_range(mine.range.id());
    req.mutable_publish_private()->mutable_serve()->set_fd(fd);
    req.mutable_publish_private()->mutable_serve()->set_bytes(bytes);
    req.mutable_publish_private()->mutable_serve()->set_token(token);
    return (*c)->Request(req, nullptr).status();
  };
  CHECK(absl::IsInvalidArgument(publish(-1, serve_window::kWindowBytes, 7)));
  CHECK(absl::IsInvalidArgument(publish(5, 0, 7)));
  CHECK(absl::IsInvalidArgument(publish(5, uint64_t{1} << 40, 7)));
  CHECK(absl::IsInvalidArgument(publish(5, serve_window::kWindowBytes, 0)));
  // Nothing was published: another session of this uid cannot see it.
  auto other = ConnectTo(d.local_socket(), "other");
  CHECK(absl::IsNotFound(
      other->RegisterPrivateInstance(mine.range.id(), 0, Elements{kByte, 1, 0}).status()));
  // Published without a window, it is read through the kernel.
  REQUIRE(mine.range.Publish().ok());
  Mine theirs_mem = RegisterMine(*other, 1 << 16, 92);
  auto src = other->RegisterPrivateInstance(mine.range.id(), 0, Elements{kByte, 4096, 0});
  auto dst = other->Register(theirs_mem.range, 0, Elements{kByte, 4096, 0});
  REQUIRE(src.ok());
  REQUIRE(dst.ok());
  REQUIRE(other->Copy(*src, *dst).status.ok());
  CHECK(other->direct_reads_run() == 1);
  CHECK(other->served_reads_run() == 0);
  CHECK(std::equal(mine.bytes.begin(), mine.bytes.begin() + 4096, theirs_mem.bytes.begin()));
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
