// RedistributionOp (redistribute_op.h): a redistribution's piece copies,
// a few at a time, on this node or, for a consumer rank on another node,
// as cross-node datatype copies.
#include "daemon/node/redistribute_op.h"

#include "core/strings.h"
#include "layout/datatype_form.h"

namespace isometry {
namespace {

using redistribution::Run;

// The form end of a piece in one side's local storage: `use_local`
// reads Run::local (the producer's indices), else Run::remote.
Result<std::shared_ptr<const EndForm>> PieceEnd(const StridedStorage& st, const PieceTask& t,
                                                int dims, bool use_local, std::string what) {
  Datatype type = *st.element;
  std::vector<int64_t> lens, disps;
  for (int k = dims - 1; k >= 0; --k) {  // innermost first
    const int d = t.order[k];
    ISO_ASSIGN_OR_RETURN(const Datatype step, Datatype::Resized(type, 0, st.stride[d]));
    const std::span<const Run> runs = t.RunsOf(d);
    lens.clear();
    disps.clear();
    for (const Run& r : runs) {
      lens.push_back(static_cast<int64_t>(r.length));
      disps.push_back(static_cast<int64_t>(use_local ? r.local : r.remote) * st.stride[d]);
    }
    ISO_ASSIGN_OR_RETURN(type, Datatype::Hindexed(lens, disps, step));
  }
  ISO_ASSIGN_OR_RETURN(CanonicalForm form, DatatypeForm(type, 1));
  return MakeFormEnd(std::move(form), st.span, std::move(what));
}

}  // namespace

RedistributionOp::RedistributionOp(Runtime& runtime, Setup setup) : runtime_(runtime) {
  image_plans_ = PlanImages(runtime.topology(), setup);  // may cut tasks per window
  for (const PieceTask& t : setup.tasks) total_bytes_ += t.bytes;
  task_count_ = setup.tasks.size();
  absl::MutexLock lock(&mu_);
  on_end_ = std::move(setup.done);
  finished_.assign(task_count_, false);
  images_.resize(image_plans_.size());
  for (size_t u = 0; u < image_plans_.size(); ++u) {
    images_[u].pieces_left = image_plans_[u].pieces;
  }
  setup_ = std::make_shared<const Setup>(std::move(setup));
}

Result<CopyRequest> RedistributionOp::BuildRequest(const Setup& setup, size_t i, std::byte* image) {
  const PieceTask& t = setup.tasks[i];
  const RankEnd& src = setup.producers[t.producer];
  const RankEnd& dst = setup.consumers[t.consumer];
  CopyRequest req;
  req.src = src.ref;
  req.dst = dst.ref;
  StridedStorage dst_storage = dst.storage;
  if (t.image >= 0) {  // offsets from the window's first byte, in its image or the file
    const ConsumerImagePlan& plan = image_plans_[static_cast<size_t>(t.image)];
    dst_storage.span = plan.bytes;
    if (image != nullptr) {
      req.dst = InstanceRef{plan.memory, image, plan.bytes, dst.ref.shape};
    } else {
      req.dst.file_offset += plan.offset;
    }
  }
  ISO_ASSIGN_OR_RETURN(req.src.form, PieceEnd(src.storage, t, setup.dims, true,
                                              StrCat("producer rank ", t.producer,
                                                     "'s piece for consumer rank ", t.consumer)));
  ISO_ASSIGN_OR_RETURN(req.dst.form, PieceEnd(dst_storage, t, setup.dims, false,
                                              StrCat("consumer rank ", t.consumer,
                                                     "'s piece from producer rank ", t.producer)));
  req.disk_owner = setup.disk_owner;
  req.disk_uid = setup.disk_uid;
  std::weak_ptr<RedistributionOp> self = weak_from_this();
  req.on_complete = [self, i](const Status& s) {
    if (auto op = self.lock()) op->OnPieceDone(i, s);
  };
  return req;
}

void RedistributionOp::Running::Abort(const Status& why) const {
  if (local) local->Abort(why);
  if (cross) cross->Abort(why);
}

Result<RedistributionOp::Running> RedistributionOp::Submit(const Setup& setup, size_t i,
                                                           std::byte* image) {
  ISO_ASSIGN_OR_RETURN(CopyRequest req, BuildRequest(setup, i, image));
  const PieceTask& t = setup.tasks[i];
  const RankEnd& dst = setup.consumers[t.consumer];
  Running out;
  if (dst.node.empty()) {
    ISO_ASSIGN_OR_RETURN(Transfer local, runtime_.Copy(std::move(req)));
    out.local = std::move(local);
    return out;
  }
  if (!setup.cross) {
    return Unavailable("consumer rank ", t.consumer, " lives on node '", dst.node,
                       "' and this node has no peers");
  }
  // Both ends forms: 1-D streams of the piece's bytes, each unpacked by
  // its own node; the consumer's node finds the rank's instance by name.
  CrossCopySpec spec;
  spec.src.local = req.src;
  spec.src.keep = setup.producers[t.producer].keep;
  spec.src.shape = StreamShape(req.src.form->bytes);
  spec.dst.node = dst.node;
  spec.dst.memory = dst.memory;
  spec.dst.distributed = setup.consumer_key;
  spec.dst.distributed_rank = t.consumer;
  spec.dst.local.form = req.dst.form;
  spec.dst.shape = StreamShape(req.dst.form->bytes);
  ISO_ASSIGN_OR_RETURN(out.cross, setup.cross->Copy(std::move(spec), std::move(req.on_complete)));
  return out;
}

void RedistributionOp::Start() { Pump(); }

void RedistributionOp::Pump() {
  bool mine = false;  // this call is the one launching (no recursion)
  for (;;) {
    std::shared_ptr<const Setup> setup;
    size_t i = 0;
    std::byte* image = nullptr;
    bool end = false;
    {
      absl::MutexLock lock(&mu_);
      if (pumping_ && !mine) return;  // the launching thread looks again
      if (failure_.ok() && next_ < task_count_ && setup_ && in_flight_ < setup_->concurrency &&
          ImageReadyLocked(setup_->tasks[next_].image, image)) {
        pumping_ = mine = true;
        i = next_++;
        ++in_flight_;
        setup = setup_;
      } else {
        pumping_ = false;
        end = TakeEndLocked();
      }
    }
    if (!setup) {
      if (end) Finish();
      return;
    }
    Result<Running> t = Submit(*setup, i, image);
    if (!t.ok()) {
      OnPieceDone(i, t.status());
      continue;
    }
    Status failed;
    {
      absl::MutexLock lock(&mu_);
      if (!finished_[i]) running_.emplace(i, *t);
      failed = failure_;
    }
    if (!failed.ok()) t->Abort(failed);  // failed while it was being submitted
  }
}

bool RedistributionOp::TakeEndLocked() {
  if (ended_ || in_flight_ != 0 || pumping_) return false;
  if (failure_.ok() && next_ < task_count_) return false;
  ended_ = true;
  return true;
}

void RedistributionOp::Finish() {
  std::function<void(Status)> done;
  Status status;
  std::shared_ptr<const Setup> setup;
  {
    absl::MutexLock lock(&mu_);
    done = std::move(on_end_);
    on_end_ = nullptr;
    status = failure_;
    setup = std::move(setup_);  // releases the ends once the last copy drained
    for (Image& im : images_) {
      im.buffer = ImageBuffer{};  // nothing writes them any more
    }
    spare_buffers_.clear();
  }
  setup.reset();
  if (done) done(status);
}

void RedistributionOp::OnPieceDone(size_t i, const Status& s) {
  std::vector<Running> abort;
  Status why;
  std::optional<size_t> write_image;  // its window's last piece: the image is whole
  {
    absl::MutexLock lock(&mu_);
    if (i >= finished_.size() || finished_[i]) return;
    finished_[i] = true;
    --in_flight_;
    running_.erase(i);
    if (s.ok()) {
      ++done_;
      if (setup_) {
        const int64_t unit = setup_->tasks[i].image;
        bytes_done_ += setup_->tasks[i].bytes;
        if (unit >= 0 && !images_[static_cast<size_t>(unit)].direct &&
            --images_[static_cast<size_t>(unit)].pieces_left == 0 && failure_.ok()) {
          write_image = static_cast<size_t>(unit);
          ++in_flight_;  // the image's write, until OnImageWritten
        }
      }
    } else if (failure_.ok()) {
      std::string where = "piece copy";
      if (setup_) {
        const PieceTask& t = setup_->tasks[i];
        where =
            StrCat("piece copy from producer rank ", t.producer, " to consumer rank ", t.consumer);
      }
      failure_ = Status(s.code(), StrCat("redistribution ", setup_ ? setup_->what : "", ": ", where,
                                         " failed: ", s.message()));
      for (auto& [_, t] : running_) abort.push_back(t);
      why = failure_;
    }
  }
  for (const Running& t : abort) t.Abort(why);
  if (write_image) {
    WriteImage(*write_image);
  }
  Pump();
}

void RedistributionOp::Abort(const Status& why) {
  std::vector<Running> abort;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || !failure_.ok()) return;
    failure_ = why;
    for (auto& [_, t] : running_) abort.push_back(t);
  }
  for (const Running& t : abort) t.Abort(why);
  Pump();
}

void RedistributionOp::Cancel() { Abort(absl::CancelledError("redistribution cancelled")); }

std::string RedistributionOp::PathText() const {
  absl::MutexLock lock(&mu_);
  size_t imaged = 0;
  for (const Image& im : images_) {
    imaged += im.direct ? 0 : 1;
  }
  return StrCat("redistribution ", setup_ ? setup_->what : std::string("(ended)"), ": ", done_,
                " of ", task_count_, " piece copies done, ", in_flight_, " running; ", bytes_done_,
                " of ", total_bytes_, " bytes",
                imaged == 0 ? std::string()
                            : StrCat("; ", images_written_, " of ", imaged,
                                     " consumer file ranges written from their image in memory"));
}

}  // namespace isometry
