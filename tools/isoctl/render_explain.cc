// `isoctl explain` and the alternatives under `isoctl plan`: why a copy
// took its path, the paths it could have taken with their predicted rates
// and the rule that ruled each out.
#include <string>

#include "tools/isoctl/format.h"
#include "tools/isoctl/render.h"

namespace isometry::isoctl {

std::string RenderAlternatives(const v1::ExplainPlanResponse& p) {
  if (p.alternatives().empty()) return "";
  std::string out = "alternatives (" + std::to_string(p.alternatives_weighed()) +
                    " other paths weighed; * the path taken):\n";
  for (const v1::PlanAlternative& a : p.alternatives()) {
    const std::string rate =
        a.predicted_bytes_per_s() > 0 ? FormatRate(a.predicted_bytes_per_s()) : "rejected";
    out += std::string(a.chosen() ? "  * " : "    ") + rate + "  " + a.path() + "\n";
    out += "        " + a.verdict() + "\n";
  }
  return out;
}

std::string RenderExplain(const v1::ExplainTransferResponse& e) {
  std::string out = RenderTransfer(e.transfer());
  const v1::ExplainPlanResponse& p = e.plan();
  out += "algorithm: " + p.algorithm() + "\n";
  if (!e.comparison().empty()) out += "against the model: " + e.comparison() + "\n";
  if (!p.why().empty()) out += "why: " + p.why() + "\n";
  for (const std::string& line : e.qos()) out += "qos: " + line + "\n";
  return out + RenderAlternatives(p);
}

}  // namespace isometry::isoctl
