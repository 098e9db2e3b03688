#include "tools/bench/prediction.h"

#include <string>

namespace isometry::bench {

Prediction PredictionOf(const Runtime& rt, const InstanceRef& src, const InstanceRef& dst,
                        bool durable) {
  const Result<Path> path = rt.Plan(src, dst, durable);
  if (!path.ok()) {
    return {0, "no plan: " + path.status().ToString()};
  }
  if (path->predicted_bps <= 0) {
    return {0, "no plan: the model gave no figure (" + path->algorithm + ")"};
  }
  return {path->predicted_bps / 1e9, ""};
}

}  // namespace isometry::bench
