// The public face of the full planner. The work is done in:
//   shape_algebra     layouts with variable blocking factors, candidates;
//   path_evaluation   the model on a concrete path (EvaluatePath);
//   transfer_graph    the topology indexed for the search;
//   block_constraints the constraint system over blocking factors;
//   path_search       the branch and bound over paths (FullPlanner::Plan).
#include "planner/full_planner.h"

#include "planner/path_evaluation.h"
#include "planner/path_search.h"
#include "planner/transfer_graph.h"

namespace isometry {

struct FullPlanner::Graph : full_planner_internal::Graph {
  using full_planner_internal::Graph::Graph;
};

FullPlanner::FullPlanner(Topology topo, FullPlannerOptions options)
    : graph_(std::make_unique<const Graph>(std::move(topo), options)) {}
FullPlanner::~FullPlanner() = default;
FullPlanner::FullPlanner(FullPlanner&&) noexcept = default;
FullPlanner& FullPlanner::operator=(FullPlanner&&) noexcept = default;

Result<Path> FullPlanner::Plan(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                               uint64_t field_bytes, uint64_t element_bytes) const {
  return full_planner_internal::SearchBestPath(*graph_, src, dst, bounds, field_bytes,
                                               element_bytes);
}

Result<Path> FullPlanner::Evaluate(Path path, const Box& bounds, uint64_t field_bytes,
                                   uint64_t element_bytes, bool durable) const {
  const Graph& g = *graph_;
  // Copies of the edges read at another curve; reserved so that the
  // pointers handed out stay valid.
  std::vector<TopologyEdge> unsynced;
  unsynced.reserve(path.edges.size());
  return full_planner_internal::EvaluateWith(
      [&](MemoryId a, MemoryId b) -> const TopologyEdge* {
        const int s = g.Index(a), d = g.Index(b);
        const TopologyEdge* e = s >= 0 && d >= 0 ? g.EdgeBetween(s, d) : nullptr;
        if (durable || !e || !e->tp_unsynced || unsynced.size() == unsynced.capacity()) return e;
        unsynced.push_back(*e);
        unsynced.back().tp = *e->tp_unsynced;
        return &unsynced.back();
      },
      std::move(path), bounds, field_bytes, g.options, element_bytes);
}

Result<Path> FullPlanner::Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const {
  return graph_->Simple(src, dst);
}

const Topology& FullPlanner::topology() const { return graph_->topo; }
const FullPlannerOptions& FullPlanner::options() const { return graph_->options; }

Result<Path> PlanFull(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst,
                      const Box& bounds, uint64_t field_bytes, const FullPlannerOptions& options) {
  return FullPlanner(topo, options).Plan(src, dst, bounds, field_bytes);
}

}  // namespace isometry
