#include "daemon/server/grpc_streams.h"

#include <algorithm>

#include "daemon/node/pools.h"
#include "daemon/node/watches.h"
#include "daemon/server/convert.h"
#include "daemon/server/convert_watch.h"

namespace isometry {
namespace {

// Bytes [offset, offset + length) of an allocation the session may use
// (its own or a published one), checked before a stream moves any byte.
Status CheckStreamRange(const Node& node, SessionRef session, uint64_t allocation, uint64_t offset,
                        uint64_t length) {
  ISO_ASSIGN_OR_RETURN(AllocationReport a, node.pools().Lookup(session, allocation));
  if (offset > a.bytes || length > a.bytes - offset) {
    return OutOfRange("bytes [", offset, ", ", offset, "+", length, ") lie outside allocation ",
                      allocation, " of ", a.bytes, " bytes");
  }
  return OkStatus();
}

// ReadStream: one node::Pools::Read per chunk, each written before the next is
// read, so a stream holds one chunk in memory.
class ReadStreamReactor final : public grpc::ServerWriteReactor<v1::ReadChunk> {
 public:
  static constexpr uint64_t kChunk = 1 << 20;

  ReadStreamReactor(const Node& node, SessionRef session, const v1::ReadRequest& req)
      : node_(node),
        session_(session),
        allocation_(req.allocation()),
        offset_(req.offset()),
        length_(req.length()) {
    Status s = CheckStreamRange(node_, session_, allocation_, offset_, length_);
    if (!s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  void Next() {
    if (sent_ == length_) {
      Finish(grpc::Status::OK);
      return;
    }
    const uint64_t n = std::min(kChunk, length_ - sent_);
    auto data = node_.pools().Read(session_, allocation_, offset_ + sent_, n);
    if (!data.ok()) {
      Finish(ToGrpc(data.status()));
      return;
    }
    chunk_.set_offset(offset_ + sent_);
    *chunk_.mutable_data() = *std::move(data);
    sent_ += n;
    StartWrite(&chunk_);
  }

  const Node& node_;
  const SessionRef session_;
  const uint64_t allocation_, offset_, length_;
  uint64_t sent_ = 0;
  v1::ReadChunk chunk_;  // the one being written
};

// WriteStream: the first message's range is checked before any byte is
// written; then one node::Pools::Write per message.
class WriteStreamReactor final : public grpc::ServerReadReactor<v1::WriteStreamRequest> {
 public:
  WriteStreamReactor(Node& node, SessionRef session) : node_(node), session_(session) {
    StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished sending (or went away)
      Finish(ToGrpc(Ended()));
      return;
    }
    if (!started_) {
      started_ = true;
      allocation_ = req_.allocation();
      offset_ = req_.offset();
      length_ = req_.length();
      Status s = CheckStreamRange(node_, session_, allocation_, offset_, length_);
      if (!s.ok()) {
        Finish(ToGrpc(s));
        return;
      }
    }
    const std::string& data = req_.data();
    if (data.size() > length_ - received_) {
      Finish(ToGrpc(InvalidArgument("WriteStream sent more than the ", length_,
                                    " bytes its first message announced; bytes [", offset_, ", ",
                                    offset_, "+", received_, ") were written")));
      return;
    }
    if (!data.empty()) {
      Status s = node_.pools().Write(session_, allocation_, offset_ + received_, data);
      if (!s.ok()) {
        Finish(ToGrpc(s));
        return;
      }
      received_ += data.size();
    }
    StartRead(&req_);
  }

  void OnDone() override { delete this; }

 private:
  Status Ended() const {
    if (!started_) return InvalidArgument("WriteStream ended before its first message");
    if (received_ != length_) {
      return InvalidArgument("WriteStream ended after ", received_, " of the ", length_,
                             " bytes its first message announced; bytes [", offset_, ", ", offset_,
                             "+", received_, ") were written");
    }
    return OkStatus();
  }

  Node& node_;
  const SessionRef session_;
  bool started_ = false;
  uint64_t allocation_ = 0, offset_ = 0, length_ = 0, received_ = 0;
  v1::WriteStreamRequest req_;  // the one being read
};

// ReadAccessLog: one Next outstanding or one batch being written, never
// both, so exactly one path reaches Finish. Next's answer may come on the
// watch's worker thread; StartWrite and Finish are the last things done
// there (OnDone may delete the reactor right after).
class AccessLogReactor final : public grpc::ServerWriteReactor<v1::AccessLogBatch> {
 public:
  AccessLogReactor(grpc::CallbackServerContext* ctx, Node& node, SessionRef session,
                   const v1::ReadAccessLogRequest& req) {
    Result<std::unique_ptr<WatchReader>> r =
        node.watches().ReadAccessLog(session, req.allocation());
    if (!r.ok()) {
      Finish(ToGrpc(r.status()));
      return;
    }
    reader_ = *std::move(r);
    // Tells the client the reader holds the log before any entry exists,
    // so it may start the writes it wants to see (a refusal sends no
    // headers of its own: they come with its status).
    ctx->AddInitialMetadata(std::string(kLogReaderOpenKey), "1");
    StartSendInitialMetadata();
    Pull();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      reader_->Cancel();
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    reader_->Ack();  // sent: copies held by a full log go on
    Pull();
  }

  // A waiting Next answers CANCELLED (and finishes); a write in flight
  // fails instead.
  void OnCancel() override {
    if (reader_) reader_->Cancel();
  }

  void OnDone() override { delete this; }

 private:
  void Pull() {
    reader_->Next([this](Result<std::vector<LoggedAccess>> batch) {
      if (!batch.ok()) {
        Finish(ToGrpc(batch.status()));
      } else if (batch->empty()) {
        Finish(grpc::Status::OK);  // the watch ended and every entry was sent
      } else {
        ToProto(*std::move(batch), &batch_);
        StartWrite(&batch_);
      }
    });
  }

  std::unique_ptr<WatchReader> reader_;
  v1::AccessLogBatch batch_;  // the one being written
};

}  // namespace

grpc::ServerWriteReactor<v1::AccessLogBatch>* NewAccessLogStream(
    grpc::CallbackServerContext* ctx, Node& node, SessionRef session,
    const v1::ReadAccessLogRequest& req) {
  return new AccessLogReactor(ctx, node, session, req);
}

grpc::ServerWriteReactor<v1::ReadChunk>* NewReadStream(const Node& node, SessionRef session,
                                                       const v1::ReadRequest& req) {
  return new ReadStreamReactor(node, session, req);
}

grpc::ServerReadReactor<v1::WriteStreamRequest>* NewWriteStream(Node& node, SessionRef session) {
  return new WriteStreamReactor(node, session);
}

}  // namespace isometry
