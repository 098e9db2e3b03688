#include "client/cpp/inspector.h"

#include <grpcpp/grpcpp.h>

#include "client/cpp/description_wire.h"
#include "isometry.grpc.pb.h"

namespace isometry::client {

struct Inspector::Impl {
  InspectorOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Isometry::Stub> stub;

  std::string Target() const { return "unix:" + options.grpc_socket; }

  template <typename Req, typename Resp>
  Status Call(grpc::Status (v1::Isometry::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
              const Req& request, Resp* response, const char* what) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options.timeout);
    const grpc::Status s = (stub.get()->*method)(&ctx, request, response);
    if (s.ok()) {
      return OkStatus();
    }
    const auto code = static_cast<absl::StatusCode>(s.error_code());
    if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded) {
      return Unavailable(what, ": no answer from isometryd at ", Target(), " within ",
                         options.timeout.count(), " ms: ", s.error_message());
    }
    return {code, StrCat(what, ": ", s.error_message())};
  }
};

Inspector::Inspector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Inspector::~Inspector() = default;

Result<std::unique_ptr<Inspector>> Inspector::Connect(const InspectorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->channel = grpc::CreateChannel(impl->Target(), grpc::InsecureChannelCredentials());
  if (!impl->channel->WaitForConnected(std::chrono::system_clock::now() + options.timeout)) {
    return Unavailable("no isometryd answers at ", impl->Target(),
                       " (config key grpc_socket) within ", options.timeout.count(), " ms");
  }
  impl->stub = v1::Isometry::NewStub(impl->channel);
  return std::unique_ptr<Inspector>(new Inspector(std::move(impl)));
}

Result<std::vector<ChannelSummary>> Inspector::ListChannels() {
  v1::ListChannelsResponse resp;
  ISO_RETURN_IF_ERROR(impl_->Call(&v1::Isometry::Stub::ListChannels, v1::ListChannelsRequest(),
                                  &resp, "ListChannels"));
  std::vector<ChannelSummary> out;
  for (const v1::ChannelInfo& c : resp.channels()) {
    ChannelSummary s{.name = c.name(),
                     .kind = c.kind(),
                     .edges = {c.edges().begin(), c.edges().end()},
                     .threads = c.threads(),
                     .max_in_flight = c.max_in_flight(),
                     .requests_in_flight = c.requests_in_flight(),
                     .requests_done = c.requests_done(),
                     .bytes_done = c.bytes_done(),
                     .current_bytes_per_s = c.current_bytes_per_s(),
                     .peak_bytes_per_s = c.peak_bytes_per_s(),
                     .rate_limit_bytes_per_s = c.rate_limit_bytes_per_s(),
                     .limits = c.limits()};
    for (const v1::QueueLevel& q : c.queued()) {
      s.queued += q.xds();
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<TransferSummary>> Inspector::ListTransfers() {
  v1::ListTransfersResponse resp;
  ISO_RETURN_IF_ERROR(impl_->Call(&v1::Isometry::Stub::ListTransfers, v1::ListTransfersRequest(),
                                  &resp, "ListTransfers"));
  std::vector<TransferSummary> out;
  for (const v1::TransferInfo& t : resp.transfers()) {
    out.push_back({.id = t.id(),
                   .state = t.state(),
                   .code = static_cast<absl::StatusCode>(t.code()),
                   .message = t.message(),
                   .priority = t.priority(),
                   .bytes = t.bytes(),
                   .elapsed_s = t.elapsed_s(),
                   .path = t.path(),
                   .predicted_bytes_per_s = t.predicted_bytes_per_s(),
                   .measured_bytes_per_s = t.measured_bytes_per_s(),
                   .remote_half = t.remote_half()});
  }
  return out;
}

Result<PlanExplanation> Inspector::Explain(const ExplainQuery& query) {
  v1::ExplainPlanRequest req;
  req.set_src_memory(query.src_memory);
  req.set_dst_memory(query.dst_memory);
  ISO_RETURN_IF_ERROR(DescribeEnds(query.src, query.dst, &req));
  v1::ExplainPlanResponse resp;
  ISO_RETURN_IF_ERROR(impl_->Call(&v1::Isometry::Stub::ExplainPlan, req, &resp, "ExplainPlan"));
  PlanExplanation out{.algorithm = resp.algorithm(),
                      .predicted_bytes_per_s = resp.predicted_bytes_per_s(),
                      .chunks = resp.chunks(),
                      .chunk_bytes = resp.chunk_bytes(),
                      .why = resp.why(),
                      .text = resp.text()};
  for (const v1::PlanHop& h : resp.hops()) {
    out.hops.push_back({.src_memory = h.src_memory(),
                        .dst_memory = h.dst_memory(),
                        .channel = h.channel(),
                        .request_bytes = h.request_bytes(),
                        .buffer_bytes = h.buffer_bytes(),
                        .predicted_bytes_per_s = h.predicted_bytes_per_s()});
  }
  return out;
}

}  // namespace isometry::client
