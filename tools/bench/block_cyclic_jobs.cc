#include "tools/bench/block_cyclic_jobs.h"

#include <cstring>

namespace isometry::bench {
namespace {

// Global index of local index `l` on process `coord` of `procs`.
uint64_t GlobalOf(uint64_t l, uint64_t block, uint64_t procs, uint64_t coord) {
  return ((l / block) * procs + coord) * block + l % block;
}

client::DistributedSpec SpecOf(const Redistribution2d& r, const BlockCyclic2d& g) {
  using Kind = client::DimDistribution::Kind;
  return {{r.m, r.n},
          {{Kind::kBlockCyclic, g.mb}, {Kind::kBlockCyclic, g.nb}},
          {g.p, g.q},
          /*column_major=*/false,
          sizeof(double)};
}

}  // namespace

uint64_t LocalExtent(uint64_t extent, uint64_t block, uint64_t procs, uint64_t coord) {
  const uint64_t blocks = extent / block;  // whole blocks
  uint64_t n = (blocks / procs) * block;
  const uint64_t extra = blocks % procs;
  if (coord < extra) {
    n += block;
  } else if (coord == extra) {
    n += extent % block;
  }
  return n;
}

Status BlockCyclicJobs::Join(const std::string& socket, const BlockCyclic2d& g,
                             const std::string& name, bool producer, bool private_memory,
                             std::vector<Rank>* out) const {
  const client::DistributedSpec spec = SpecOf(r_, g);
  for (uint64_t rank = 0; rank < g.p * g.q; ++rank) {
    Rank k;
    ISO_ASSIGN_OR_RETURN(k.client, client::Client::Connect({.local_socket = socket, .name = name}));
    const uint64_t row = rank / g.q, col = rank % g.q;
    k.rows = LocalExtent(r_.m, g.mb, g.p, row);
    k.cols = LocalExtent(r_.n, g.nb, g.q, col);
    const uint64_t count = k.rows * k.cols;
    if (count > 0) {
      const InstanceShape shape{
          Box::FromExtents({static_cast<int64_t>(k.rows), static_cast<int64_t>(k.cols)}),
          FieldSpace::Uniform(1, sizeof(double)), Layout::ColumnMajor(2)};
      if (private_memory) {
        k.own.assign(count, 0.0);
        k.data = k.own.data();
        ISO_ASSIGN_OR_RETURN(auto range, k.client->RegisterPrivate(k.data, count * sizeof(double)));
        ISO_ASSIGN_OR_RETURN(auto inst, k.client->Register(range, 0, shape));
        k.inst.emplace(std::move(inst));
      } else {
        ISO_ASSIGN_OR_RETURN(auto a, k.client->Allocate("sys0", count * sizeof(double)));
        k.data = reinterpret_cast<double*>(a.data());
        std::memset(k.data, 0, count * sizeof(double));
        ISO_ASSIGN_OR_RETURN(auto inst, k.client->Register(a, 0, shape));
        k.inst.emplace(std::move(inst));
        k.alloc.emplace(std::move(a));
      }
    }
    for (uint64_t j = 0; producer && j < k.cols; ++j) {
      const uint64_t gj = GlobalOf(j, g.nb, g.q, col);
      for (uint64_t i = 0; i < k.rows; ++i) {
        k.data[i + j * k.rows] = static_cast<double>(GlobalOf(i, g.mb, g.p, row) * r_.n + gj);
      }
    }
    ISO_RETURN_IF_ERROR(
        k.client->JoinDistributed(name, spec, rank, k.inst ? &*k.inst : nullptr).status());
    out->push_back(std::move(k));
  }
  return absl::OkStatus();
}

Result<std::unique_ptr<BlockCyclicJobs>> BlockCyclicJobs::Start(const std::string& socket,
                                                                const Redistribution2d& r,
                                                                const std::string& name,
                                                                bool private_memory) {
  std::unique_ptr<BlockCyclicJobs> jobs(new BlockCyclicJobs);
  jobs->r_ = r;
  jobs->producer_ = name + "-producer";
  jobs->consumer_ = name + "-consumer";
  ISO_RETURN_IF_ERROR(
      jobs->Join(socket, r.from, jobs->producer_, true, private_memory, &jobs->from_));
  ISO_RETURN_IF_ERROR(jobs->Join(socket, r.to, jobs->consumer_, false, private_memory, &jobs->to_));
  return jobs;
}

Status BlockCyclicJobs::Run() { return to_[0].client->Redistribute(producer_, consumer_).status; }

std::span<const double> BlockCyclicJobs::Consumer(uint64_t rank) const {
  const Rank& k = to_.at(rank);
  return {k.data, k.rows * k.cols};
}

uint64_t BlockCyclicJobs::Mismatches() const {
  uint64_t bad = 0;
  for (uint64_t rank = 0; rank < to_.size(); ++rank) {
    const Rank& k = to_[rank];
    const uint64_t row = rank / r_.to.q, col = rank % r_.to.q;
    for (uint64_t j = 0; j < k.cols; ++j) {
      const uint64_t gj = GlobalOf(j, r_.to.nb, r_.to.q, col);
      for (uint64_t i = 0; i < k.rows; ++i) {
        const double want = static_cast<double>(GlobalOf(i, r_.to.mb, r_.to.p, row) * r_.n + gj);
        bad += k.data[i + j * k.rows] != want;
      }
    }
  }
  return bad;
}

}  // namespace isometry::bench
