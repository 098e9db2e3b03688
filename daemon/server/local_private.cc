#include "daemon/server/local_private.h"

#include <unistd.h>

#include <memory>

#include "core/strings.h"
#include "daemon/node/instances.h"
#include "layout/hop_window.h"

namespace isometry {

Status AnswerOwnHops(Node& node, SessionRef session, int cq_event, v1::OwnHopsResponse* resp,
                     std::vector<int>* fds) {
  // The work ring's wake-up is the completion eventfd the client already
  // sleeps on; a dup of it outlives the connection harmlessly.
  auto event = std::make_shared<UniqueFd>(::dup(cq_event));
  if (!event->valid()) return Internal("dup: ", ErrnoString(errno));
  ISO_ASSIGN_OR_RETURN(node::Instances::OwnHopsWindow w,
                       node.instances().EnableOwnHops(session, [event] {
                         const uint64_t one = 1;
                         (void)!::write(event->get(), &one, sizeof one);
                       }));
  resp->set_bytes(w.bytes);
  fds->push_back(w.fd);
  return OkStatus();
}

Status AnswerDirectRead(Node& node, SessionRef session, std::atomic<uint32_t>* epoch,
                        const v1::DirectReadRequest& req, v1::DirectReadResponse* resp,
                        std::vector<int>* fds, std::vector<UniqueFd>* owned) {
  ISO_ASSIGN_OR_RETURN(
      node::Instances::DirectRead lease,
      node.instances().GrantDirectRead(session, req.src_instance(), req.dst_instance(), epoch,
                                       req.served_reads()));
  std::string program(hop_window::EncodedBytes(*lease.program), '\0');
  const std::optional<uint64_t> written = hop_window::EncodeProgram(
      *lease.program, reinterpret_cast<std::byte*>(program.data()), program.size());
  if (!written) return Internal("direct read: the program did not encode");
  program.resize(*written);
  resp->set_pid(lease.pid);
  resp->set_remote_address(lease.remote_address);
  resp->set_local_address(lease.local_address);
  resp->set_bytes(lease.program->bytes);
  resp->set_src_span(lease.src_span);
  resp->set_dst_span(lease.dst_span);
  resp->set_program_ops(lease.program->ops.size());
  resp->set_program(std::move(program));
  resp->set_epoch(lease.epoch);
  if (!lease.unpack.empty()) {
    resp->set_piece_bytes(lease.piece_bytes);
    for (const CopyProgram& piece : lease.unpack) {
      std::string records(hop_window::EncodedBytes(piece), '\0');
      const std::optional<uint64_t> n = hop_window::EncodeProgram(
          piece, reinterpret_cast<std::byte*>(records.data()), records.size());
      if (!n) return Internal("direct read: a piece's program did not encode");
      records.resize(*n);
      resp->add_unpack_programs(std::move(records));
      resp->add_unpack_ops(piece.ops.size());
    }
  }
  if (lease.serve) {
    resp->mutable_serve()->set_fd(lease.serve->fd);
    resp->mutable_serve()->set_bytes(lease.serve->bytes);
    resp->mutable_serve()->set_token(lease.serve->token);
  }
  fds->push_back(lease.pidfd.get());
  owned->push_back(std::move(lease.pidfd));
  return OkStatus();
}

std::optional<node::Instances::ServeWindowRef> ServeWindowOf(const v1::PublishPrivateRequest& req) {
  if (!req.has_serve()) return std::nullopt;
  return node::Instances::ServeWindowRef{req.serve().fd(), req.serve().bytes(),
                                         req.serve().token()};
}

}  // namespace isometry
