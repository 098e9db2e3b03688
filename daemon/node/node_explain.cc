// Why a copy took its path: the alternatives the planner could have taken,
// for ExplainPlan and for a transfer that ran (isoctl plan, isoctl explain).
#include <set>

#include "absl/strings/str_format.h"
#include "core/thread_nice.h"
#include "daemon/node/node_impl.h"

namespace isometry {

namespace {

// Measured against predicted, in words (TransferExplanation::comparison).
std::string CompareRates(const TransferReport& r) {
  if (r.state == "waiting" || r.state == "running") {
    return absl::StrCat(r.state, ": no measured rate until it ends (predicted ",
                        RateText(r.predicted_bytes_per_s), ")");
  }
  if (r.state != "done") {
    return absl::StrCat("ended ", r.state, ": no measured rate");
  }
  const std::string measured = absl::StrCat("measured ", RateText(r.measured_bytes_per_s));
  if (r.predicted_bytes_per_s <= 0) {
    return absl::StrCat(measured, "; the model made no prediction for its path");
  }
  const double ratio = r.measured_bytes_per_s / r.predicted_bytes_per_s;
  std::string out = absl::StrFormat("%s: %.0f%% of the predicted %s", measured, ratio * 100,
                                    RateText(r.predicted_bytes_per_s));
  // The measured rate is bytes over the whole wall time, submission and
  // queueing included: a small copy's is mostly that fixed cost.
  if (r.bytes < (uint64_t{1} << 20)) {
    absl::StrAppend(&out, " (a copy under 1 MiB: its time is mostly the fixed cost of a request)");
  } else if (ratio < 0.5) {
    absl::StrAppend(&out, " (it waited in queues, shared its channels, or the calibration is ",
                    "stale: isoctl calibrate)");
  }
  return out;
}

// ", its bytes moved at nice N" / "under SCHED_IDLE" where the class has
// a value (qos.class.nice), and whether the threads take it.
std::string CpuText(const QosClassStats& c) {
  if (c.nice == 0) return "";
  return absl::StrCat(
      ", its bytes moved ",
      c.nice == kIdleThreadNice ? "under SCHED_IDLE" : absl::StrCat("at nice ", c.nice),
      c.nice_applied ? "" : " (not applied: the daemon may not change it back)");
}

// TransferExplanation::qos, from the classes as they stand now.
std::vector<std::string> QosLines(const TransferReport& r, const PlanReport& plan,
                                  const std::vector<QosClassStats>& classes) {
  std::vector<std::string> out;
  const QosClassStats* c = nullptr;
  for (const QosClassStats& k : classes) {
    if (k.name == r.qos_class) c = &k;
  }
  if (!c) return out;
  size_t live = 0;
  for (const QosClassStats& k : classes) live += !k.retired;
  out.push_back(live <= 1 && !c->retired
                    ? absl::StrCat("class '", c->name, "', the only one: nothing shared by weight")
                    : absl::StrCat("class '", c->name, "', weight ", c->weight, CpuText(*c),
                                   c->retired ? " (retired by a reload)" : "",
                                   " (as the classes stand now)"));
  if (r.requested_priority > r.priority) {
    out.push_back(absl::StrCat("priority ", r.priority, ": it asked for ", r.requested_priority,
                               ", above the class's max_priority"));
  }
  std::set<std::string> seen;
  for (const PlanHopReport& h : plan.hops) {
    if (!seen.insert(h.channel).second) continue;
    for (const QosChannelStats& s : c->channels) {
      if (s.channel != h.channel || live <= 1) continue;
      std::string line =
          absl::StrFormat("%s: the class has %.0f%% of its recent bytes", s.channel, s.share * 100);
      if (s.weight_share > 0) {
        absl::StrAppend(
            &line, absl::StrFormat(" against a %.0f%% weight share now", s.weight_share * 100));
      }
      if (s.paused) absl::StrAppend(&line, "; paused there (a cap of 0)");
      if (s.rate_cap) absl::StrAppend(&line, "; capped at ", RateText(double(s.rate_cap)));
      if (s.in_flight_cap >= 0) {
        absl::StrAppend(&line, "; at most ", s.in_flight_cap, " request(s) in flight");
      }
      if (s.throttled_s > 0) {
        absl::StrAppend(
            &line, absl::StrFormat("; its caps have held the class back %.2f s there since start",
                                   s.throttled_s));
      }
      out.push_back(std::move(line));
    }
  }
  return out;
}

}  // namespace

PlanHopReport ReportHop(const Path& path, size_t h, const Topology& topo) {
  const TopologyEdge& e = path.edges[h];
  PlanHopReport hop;
  hop.src_memory = topo.NameOf(e.src);
  hop.dst_memory = topo.NameOf(e.dst);
  hop.channel = e.channel_name;
  hop.src_layout = path.nodes[h].layout.ToString();
  hop.dst_layout = path.nodes[h + 1].layout.ToString();
  hop.predicted_bytes_per_s = h < path.hop_bps.size() ? path.hop_bps[h] : 0;
  hop.run_bytes = h < path.run_bytes.size() ? path.run_bytes[h] : 0;
  return hop;
}

void ReportAlternatives(const Alternatives& alts, const Topology& topo, PlanReport& rep) {
  rep.alternatives_weighed = alts.weighed;
  for (const PlanAlternative& a : alts.paths) {
    PlanAlternativeReport r;
    r.text = a.path.ToString(topo);
    for (size_t h = 0; h < a.path.edges.size(); ++h) r.hops.push_back(ReportHop(a.path, h, topo));
    r.predicted_bytes_per_s = a.path.predicted_bps;
    r.chosen = a.chosen;
    r.verdict = a.verdict;
    rep.alternatives.push_back(std::move(r));
  }
}

Result<TransferExplanation> node::Copies::ExplainTransfer(SessionRef session, uint64_t transfer,
                                                          bool is_operator) const {
  TransferExplanation out;
  std::shared_ptr<const Path> path;
  PlanInputs inputs;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                         impl_->TouchableLocked(session, transfer, is_operator, "explaining"));
    const TransferRecord& r = *f.record;
    if (r.cross) {
      return FailedPrecondition("transfer ", transfer,
                                " is a cross-node copy: isoctl transfers shows its path; its "
                                "alternatives are weighed for copies within one node");
    }
    std::optional<TransferSummary> live;
    if (r.handle) live = r.handle->Summary();
    const TransferSummary* t = live ? &*live : r.ended ? &*r.ended : nullptr;
    if (!t || !t->path) {
      return FailedPrecondition("transfer ", transfer, " never had a path: it ended before ",
                                "it was planned (", r.status.ToString(), ")");
    }
    out.transfer = impl_->BuildReport(r);
    path = t->path;
    inputs = t->inputs;
  }
  // Weighed outside the node's lock: a planner evaluation per candidate.
  const Topology& topo = impl_->runtime->topology();
  out.plan.algorithm = path->algorithm;
  out.plan.text = path->ToString(topo);
  out.plan.predicted_bytes_per_s = out.transfer.predicted_bytes_per_s;
  for (size_t h = 0; h < path->edges.size(); ++h) {
    out.plan.hops.push_back(ReportHop(*path, h, topo));
  }
  ReportAlternatives(impl_->runtime->Weigh(*path, inputs), topo, out.plan);
  if (inputs.datatype) {
    out.plan.why =
        "a datatype copy: the paths are weighed without the cost of its ends' forms, which the "
        "transfer's own prediction counts";
  }
  out.comparison = CompareRates(out.transfer);
  out.qos = QosLines(out.transfer, out.plan, impl_->runtime->Qos());
  return out;
}

}  // namespace isometry
