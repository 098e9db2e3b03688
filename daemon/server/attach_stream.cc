#include "daemon/server/attach_stream.h"

#include "daemon/node/copies.h"
#include "daemon/node/sessions.h"
#include "daemon/server/convert.h"

namespace isometry {

AttachReactor::AttachReactor(Node& node, std::function<void(AttachReactor*, bool)> track,
                             const std::string& name)
    : node_(node), track_(std::move(track)), state_(std::make_shared<AttachState>()) {
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
  }
  track_(this, true);
  v1::SessionEvent first;
  first.set_session(session_);
  first.set_session_id(session->id);
  state_->Push(std::move(first));
}

void AttachReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&state_->mu);
  state_->writing = false;
  if (!state_->queue.empty()) state_->queue.pop_front();
  if (!ok) return;  // the stream is broken; OnCancel/OnDone follow
  state_->WriteNext();
}

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
  }
  if (!session_.empty()) track_(this, false);
  delete this;
}

void AttachReactor::CloseSession() {
  if (ref_.has_value() && !closed_.exchange(true)) node_.sessions().CloseSession(ref_);
}

}  // namespace isometry
