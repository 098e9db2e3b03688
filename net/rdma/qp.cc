#include "net/rdma/qp.h"

#include <algorithm>
#include <cerrno>

#include "core/strings.h"

namespace isometry::rdma {
namespace {

Status Modify(ibv_qp* qp, ibv_qp_attr& attr, int mask, const char* state) {
  if (int err = ibv_modify_qp(qp, &attr, mask); err != 0) {
    return absl::UnavailableError(StrCat("RDMA QP ", qp->qp_num, ": ibv_modify_qp to ", state,
                                         " failed: ", ErrnoString(err)));
  }
  return OkStatus();
}

}  // namespace

Result<PortAddress> ResolvePort(ibv_context* context, int gid_index) {
  ibv_device_attr dev{};
  if (int err = ibv_query_device(context, &dev); err != 0) {
    return absl::UnavailableError(StrCat("ibv_query_device failed: ", ErrnoString(err)));
  }
  for (uint8_t port = 1; port <= dev.phys_port_cnt; ++port) {
    ibv_port_attr attr{};
    if (ibv_query_port(context, port, &attr) != 0 || attr.state != IBV_PORT_ACTIVE) continue;
    PortAddress a;
    a.port = port;
    a.lid = attr.lid;
    a.active_mtu = attr.active_mtu;
    a.roce = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    a.gid_index = gid_index;
    if (gid_index < 0) {
      // Best type first: RoCE v2 (routable), RoCE v1, then whatever is at 0.
      int best = -1, best_rank = -1;
      for (int i = 0; i < attr.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(context, port, static_cast<uint32_t>(i), &e, 0) != 0) continue;
        const int rank = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? 2
                         : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? 1
                                                              : 0;
        if (rank > best_rank) {
          best = i;
          best_rank = rank;
        }
      }
      a.gid_index = std::max(best, 0);
    }
    if (int err = ibv_query_gid(context, port, a.gid_index, &a.gid); err != 0) {
      return absl::UnavailableError(StrCat("ibv_query_gid(port ", int{port}, ", index ",
                                           a.gid_index, ") failed: ", ErrnoString(err)));
    }
    return a;
  }
  return absl::UnavailableError("no ACTIVE port on the RDMA device");
}

Result<CompletionQueue> CreateCq(ibv_context* context, int entries, bool with_channel) {
  CompletionQueue q;
  if (with_channel) {
    q.channel.reset(ibv_create_comp_channel(context));
    if (!q.channel) {
      return absl::UnavailableError(StrCat("ibv_create_comp_channel failed: ", ErrnoString(errno)));
    }
  }
  q.cq.reset(ibv_create_cq(context, entries, nullptr, q.channel.get(), 0));
  if (!q.cq) {
    return absl::UnavailableError(
        StrCat("ibv_create_cq(", entries, " entries) failed: ", ErrnoString(errno)));
  }
  return q;
}

Result<QpPtr> CreateRcQp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, uint32_t send_wr,
                         uint32_t recv_wr) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = send_wr;
  init.cap.max_recv_wr = recv_wr;
  init.cap.max_send_sge = 4;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 0;
  QpPtr qp(ibv_create_qp(pd, &init));
  if (!qp) {
    return absl::UnavailableError(StrCat("ibv_create_qp (RC, ", send_wr, " send / ", recv_wr,
                                         " receive requests) failed: ", ErrnoString(errno)));
  }
  return qp;
}

Status ConnectRc(ibv_qp* qp, const PortAddress& local, uint32_t local_psn,
                 const QpAddress& remote) {
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = local.port;
  init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ISO_RETURN_IF_ERROR(Modify(
      qp, init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT"));

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = std::min(local.active_mtu, remote.mtu);
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn & 0xFFFFFF;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;  // 0.64 ms before a sender retries a receive-not-ready
  rtr.ah_attr.port_num = local.port;
  rtr.ah_attr.dlid = remote.lid;
  if (local.roce || remote.lid == 0) {
    // RoCE (and routed IB) address by GID: a global route header.
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = remote.gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gid_index);
    rtr.ah_attr.grh.hop_limit = 64;
  }
  ISO_RETURN_IF_ERROR(Modify(qp, rtr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                             "RTR"));

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 14;   // 4.096 us * 2^14 = 67 ms per transport retry
  rts.retry_cnt = 7;  // then the completion fails: the peer is gone
  rts.rnr_retry = 7;  // receive-not-ready: retry without limit
  rts.sq_psn = local_psn & 0xFFFFFF;
  rts.max_rd_atomic = 1;
  return Modify(qp, rts,
                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                "RTS");
}

Status ResetQp(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  return Modify(qp, attr, IBV_QP_STATE, "RESET");
}

QpAddress AddressOf(const ibv_qp* qp, const PortAddress& local, uint32_t psn) {
  QpAddress a;
  a.qpn = qp->qp_num;
  a.psn = psn & 0xFFFFFF;
  a.lid = local.lid;
  a.gid = local.gid;
  a.mtu = local.active_mtu;
  return a;
}

std::string DescribeCompletion(const ibv_wc& wc) {
  return StrCat(ibv_wc_status_str(wc.status), " (status ", static_cast<int>(wc.status),
                ", vendor error ", wc.vendor_err, ") on wr ", wc.wr_id);
}

}  // namespace isometry::rdma
