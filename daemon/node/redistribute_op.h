// The insides of node::Distributed::Redistribute (node_redistribute.cc), shared with
// the join checks (node_distributed.cc). Nothing outside daemon/node
// includes this header.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/datatype.h"
#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/byte_budget.h"
#include "daemon/node/cross_copy.h"
#include "daemon/node/node_distributed.h"
#include "redistribution/exchange.h"

namespace isometry {

struct Allocation;
class Session;

// The namespace of distributed instance names a session sees: its uid's,
// or the one gRPC sessions share ("uid 1000/", "grpc/").
std::string DistributedNamespace(const Session& s);

// Why a session finds no distributed instance `name` in namespace `ns`
// (`keys`: every key there is, namespace + name): names the namespace and,
// where the name exists in another, says which, since a job whose ranks
// joined partly over the local socket and partly over gRPC is two
// different names.
template <class Map>
std::string NoDistributedInstance(const Map& keys, const std::string& ns, std::string_view name);

// A local instance whose element at local index (i_0, ..., i_k-1) starts
// at sum(i_d * stride[d]) and whose fields lie where `element` says from
// there: any layout without blocked dimensions (x_in / x_out) whose fields
// share their strides (AOS in any dimension order; SOA when every field
// has one size).
struct StridedStorage {
  std::array<int64_t, redistribution::kMaxDims> stride{};
  std::optional<Datatype> element;  // a struct of the fields, in field order
  uint64_t span = 0;                // the instance's storage bytes
};

// UNIMPLEMENTED (naming the layout and why) for storage that is not
// strided; `what` names the instance in the message.
Result<StridedStorage> StridedStorageOf(const InstanceShape& shape, const std::string& what);

// One rank's local instance as a copy end: where it lies (`ref` without a
// form end) and what keeps it alive.
struct RankEnd {
  InstanceRef ref;
  std::shared_ptr<const Allocation> keep;
  StridedStorage storage;
  bool empty = false;  // the rank holds no element (no instance)
  // On another node (`ref` unused): a consumer rank reached by a
  // cross-node copy, or a producer rank whose pieces that node runs.
  std::string node;
  std::string memory;  // its memory there
};

// One piece copy: what producer rank `producer` sends consumer rank
// `consumer`, restricted in dimension 0 to `dim0` (pieces are cut there so
// that one copy's description stays small).
struct PieceTask {
  uint64_t producer = 0;
  uint64_t consumer = 0;
  std::array<std::span<const redistribution::Run>, redistribution::kMaxDims> runs{};
  std::vector<redistribution::Run> dim0;
  uint64_t bytes = 0;
  // The order both ends enumerate the piece's elements in, outermost
  // dimension first (node_redistribute.cc, EnumerationOrder).
  std::array<int, redistribution::kMaxDims> order{0, 1, 2, 3};
  // A piece cut to one window of its consumer's storage (PlanImages): in
  // dimension `cut_dim` it holds `cut` instead, whose remote indices count
  // from the window's first index. -1: not cut.
  int cut_dim = -1;
  std::vector<redistribution::Run> cut;
  // The ConsumerImagePlan (index) whose window it writes; -1: none.
  int64_t image = -1;
  // Dimension 0's runs when the pieces of one window share them (instead
  // of `dim0`): a piece cut into many windows holds them once.
  std::shared_ptr<const std::vector<redistribution::Run>> shared_dim0;

  // The runs of dimension `d` both ends enumerate.
  std::span<const redistribution::Run> RunsOf(int d) const {
    if (d == cut_dim) {
      return cut;
    }
    if (d == 0) {
      return shared_dim0 ? std::span<const redistribution::Run>(*shared_dim0)
                         : std::span<const redistribution::Run>(dim0);
    }
    return runs[d];
  }
};

// A window of a consumer rank's storage in a file whose pieces would write
// it in small runs (one I/O each): the pieces of the window write an image
// of it in host memory instead, and one copy then writes the image into the
// file in place (redistribute_images.cc). A small rank is one window; a
// larger one is cut along its outermost dimension.
struct ConsumerImagePlan {
  uint64_t consumer = 0;  // the rank
  MemoryId memory;        // the host memory the image stands in (its copies' end)
  uint64_t offset = 0;    // the window's first byte in the rank's storage
  uint64_t bytes = 0;     // the window's bytes, all of them elements
  size_t pieces = 0;      // the pieces that write it
};

// A running redistribution: piece copies submitted to the runtime, at most
// `concurrency` at a time; the first failure aborts the rest. Thread-safe.
class RedistributionOp final : public CrossTransfer,
                               public std::enable_shared_from_this<RedistributionOp> {
 public:
  struct Setup {
    std::string what;  // "'a' -> 'b'"
    int dims = 0;
    std::vector<RankEnd> producers, consumers;
    // Per producer rank; `tasks` hold views into them.
    std::vector<redistribution::ExchangeSet> exchanges;
    std::vector<PieceTask> tasks;
    uint32_t concurrency = 1;
    std::string disk_owner;
    std::optional<uid_t> disk_uid;  // CopyRequest::disk_uid of every piece
    // Consumer ranks on other nodes: `consumer_key` (namespace + name)
    // names their instance there, `cross` copies to them.
    std::string consumer_key;
    CrossCopier* cross = nullptr;
    // What consumer images (ConsumerImagePlan) are charged to while they
    // are held; a window whose image finds no room is written piece by
    // piece.
    std::vector<std::shared_ptr<ByteBudget>> image_budgets;
    std::function<void(Status)> done;  // once, with the final status
  };
  RedistributionOp(Runtime& runtime, Setup setup);

  void Start();
  // Ends it with `why` (the first reason wins); pieces in flight are
  // aborted, those not started never start.
  void Abort(const Status& why) override;

  void Cancel() override;
  // Bytes its finished pieces moved.
  uint64_t bytes_done() const {
    absl::MutexLock lock(&mu_);
    return bytes_done_;
  }
  std::string PathText() const override;
  uint64_t bytes() const override { return total_bytes_; }
  std::chrono::steady_clock::time_point started() const override { return started_; }
  double predicted_bytes_per_s() const override { return 0; }

 private:
  // A piece in flight: on this node, or a cross-node copy.
  struct Running {
    std::optional<Transfer> local;
    std::shared_ptr<CrossTransfer> cross;
    void Abort(const Status& why) const;
  };
  // Host memory for images, charged to Setup::image_budgets while held.
  struct ImageBuffer {
    std::unique_ptr<std::byte[]> data;
    uint64_t capacity = 0;
    std::shared_ptr<void> charge;  // `capacity` bytes on the budgets
  };
  // A window's image (ConsumerImagePlan) while its pieces run.
  struct Image {
    ImageBuffer buffer;  // taken as its first piece starts
    size_t pieces_left = 0;
    bool direct = false;   // no room in the budgets: its pieces write the file
    bool written = false;  // its copy into the file ended
  };
  // `image`: the window's image the piece writes into (null: its storage).
  Result<CopyRequest> BuildRequest(const Setup& setup, size_t task, std::byte* image);
  // Submits piece `task`; what runs it.
  Result<Running> Submit(const Setup& setup, size_t task, std::byte* image);
  void Pump();
  void OnPieceDone(size_t task, const Status& s);
  // Under mu_: whether the next piece may start as far as images go, and
  // where it writes (its window's image, allocated now, or null).
  bool ImageReadyLocked(int64_t unit, std::byte*& image) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies window `unit`'s finished image into its file.
  void WriteImage(size_t unit);
  void OnImageWritten(size_t unit, const Status& s);
  // Under mu_: whether it has just ended (then it is the caller's to
  // report, outside the lock).
  bool TakeEndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish();

  Runtime& runtime_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t total_bytes_ = 0;
  size_t task_count_ = 0;
  mutable absl::Mutex mu_;
  // Released when it ends (the ends keep allocations alive); constant
  // until then, read outside the lock through a copy of the pointer.
  std::shared_ptr<const Setup> setup_ ABSL_GUARDED_BY(mu_);
  std::function<void(Status)> on_end_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool pumping_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  Status failure_ ABSL_GUARDED_BY(mu_);
  std::map<size_t, Running> running_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> finished_ ABSL_GUARDED_BY(mu_);
  // The windows written through images (PieceTask::image); constant
  // after construction.
  std::vector<ConsumerImagePlan> image_plans_;
  std::vector<Image> images_ ABSL_GUARDED_BY(mu_);
  int live_images_ ABSL_GUARDED_BY(mu_) = 0;
  // Buffers of written windows, kept for the next windows: a fresh one
  // costs a page fault and a cleared page every 4 KiB.
  std::vector<ImageBuffer> spare_buffers_ ABSL_GUARDED_BY(mu_);
  size_t images_written_ ABSL_GUARDED_BY(mu_) = 0;
};

// Which windows of which consumer ranks of `setup` go through an image
// (ConsumerImagePlan), the pieces of a windowed rank cut per window and
// marked with their window (PieceTask::image), and `setup.tasks` reordered
// so that the pieces of each window are next to each other, windows in
// order (the rest after them, in their order): an image lives from its
// window's first piece to its write into the file.
std::vector<ConsumerImagePlan> PlanImages(const Topology& topo, RedistributionOp::Setup& setup);

// INVALID_ARGUMENT unless the two sides have one global index space and
// element size (what a redistribution needs).
Status Compatible(const std::string& a_name, const redistribution::Distribution& a,
                  uint64_t a_bytes, const std::string& b_name,
                  const redistribution::Distribution& b, uint64_t b_bytes);

// Records `op` as using `d` (aborted when `d` ends); under the node lock.
void TrackRunning(DistributedInstance& d, const std::shared_ptr<CrossTransfer>& op);

// Every producer rank's exchange set (ASPEN) and its pieces as tasks into
// setup.tasks, but for producer ranks whose node is set (that node runs
// them); setup.producers and setup.consumers must be filled in.
Status PlanPieces(const redistribution::Distribution& prod,
                  const redistribution::Distribution& cons, uint64_t element_bytes,
                  RedistributionOp::Setup& setup);

template <class Map>
std::string NoDistributedInstance(const Map& keys, const std::string& ns, std::string_view name) {
  const auto shown = [](std::string_view n) {
    return n.starts_with("uid ") ? StrCat(n.substr(0, n.size() - 1),
                                          "'s namespace (ranks that joined over the local socket)")
                                 : std::string("the gRPC sessions' shared namespace");
  };
  std::string out = StrCat("no distributed instance '", ForLog(name), "' in ", shown(ns),
                           " (it ends when the session of any of its ranks ends)");
  for (const auto& [key, value] : keys) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos || key.compare(slash + 1, std::string::npos, name) != 0 ||
        key.compare(0, slash + 1, ns) == 0) {
      continue;
    }
    out += StrCat("; one of that name lives in ", shown(std::string_view(key).substr(0, slash + 1)),
                  ": every rank of a job joins in one namespace (all over the local socket as "
                  "one uid, or all over gRPC)");
    break;
  }
  return out;
}

}  // namespace isometry
