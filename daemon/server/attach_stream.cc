#include "daemon/server/attach_stream.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "core/log_escape.h"
#include "daemon/node/copies.h"
#include "daemon/node/sessions.h"
#include "daemon/server/convert.h"

namespace isometry {
namespace {

std::atomic<uint64_t>& DroppedEvents() {
  static std::atomic<uint64_t> dropped{0};
  return dropped;
}

}  // namespace

uint64_t AttachEventsDropped() { return DroppedEvents().load(std::memory_order_relaxed); }

void AttachState::QueueLocked(v1::SessionEvent e, uint64_t bytes) {
  if (dropped > 0) {
    e.set_dropped_completions(dropped);
    dropped = 0;
  }
  queued_bytes += bytes;
  queue.emplace_back(std::move(e), bytes);
  WriteNext();
}

void AttachState::Push(v1::SessionEvent e) {
  absl::MutexLock lock(&mu);
  if (finished) return;
  const uint64_t bytes = e.ByteSizeLong();
  if (!queue.empty() && queued_bytes + bytes > max_backlog_bytes) {
    if (dropped_total == 0) {
      spdlog::warn(
          "{}: its client does not read its Attach stream; completion events beyond "
          "daemon.max_attach_backlog_bytes = {} are dropped and the client is told how many when "
          "it reads again (logged once per session)",
          who, max_backlog_bytes);
    }
    ++dropped;
    ++dropped_total;
    DroppedEvents().fetch_add(1, std::memory_order_relaxed);
    return;
  }
  QueueLocked(std::move(e), bytes);
}

void AttachState::WriteDone(bool ok) {
  absl::MutexLock lock(&mu);
  writing = false;
  if (!queue.empty()) {
    queued_bytes -= queue.front().second;
    queue.pop_front();
  }
  if (!ok) return;  // the stream is broken; OnCancel/OnDone follow
  // The client reads again: tell it what went while it did not.
  if (dropped > 0 && queue.empty()) {
    v1::SessionEvent told;
    told.set_dropped_completions(dropped);
    const uint64_t bytes = told.ByteSizeLong();
    QueueLocked(std::move(told), bytes);
    return;
  }
  WriteNext();
}

AttachReactor::AttachReactor(Node& node, std::function<void(AttachReactor*, bool)> track,
                             const std::string& name)
    : node_(node),
      track_(std::move(track)),
      state_(std::make_shared<AttachState>(node.config().daemon.max_attach_backlog_bytes)) {
  {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = this;
  }
  std::weak_ptr<AttachState> weak = state_;
  // Completions carry the path and hops as Wait's answer does: the
  // callback's report lacks them (node.h), the ended transfer's has them.
  auto session = node_.sessions().OpenSession(
      name.empty() ? "grpc" : name, Credentials{}, [weak, node = &node_](const TransferReport& r) {
        auto s = weak.lock();
        if (!s) return;
        v1::SessionEvent e;
        ToProto(node->copies().GetTransfer(s->Session(), r.id).value_or(r), e.mutable_completed());
        s->Push(std::move(e));
      });
  if (!session.ok()) {
    state_->FinishOnce(ToGrpc(session.status()));
    return;
  }
  session_ = session->token;
  ref_ = session->ref;
  {
    absl::MutexLock lock(&state_->mu);
    state_->session = ref_;
    state_->who = fmt::format("session {} (client '{}')", session->id,
                              ForLog(name.empty() ? "grpc" : name, 64));
  }
  track_(this, true);
  v1::SessionEvent first;
  first.set_session(session_);
  first.set_session_id(session->id);
  state_->Push(std::move(first));
}

void AttachReactor::OnWriteDone(bool ok) { state_->WriteDone(ok); }

void AttachReactor::OnCancel() {
  // The client went away (or the server shuts down): the session ends.
  CloseSession();
  state_->FinishOnce(grpc::Status::CANCELLED);
}

void AttachReactor::OnDone() {
  CloseSession();
  {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = nullptr;
    state_->finished = true;
    if (state_->dropped_total > 0) {
      spdlog::info("{} ended: {} completion event(s) dropped in all (its stream was not read)",
                   state_->who, state_->dropped_total);
    }
  }
  if (!session_.empty()) track_(this, false);
  delete this;
}

void AttachReactor::CloseSession() {
  if (ref_.has_value() && !closed_.exchange(true)) node_.sessions().CloseSession(ref_);
}

}  // namespace isometry
