// The plan's predicted throughput for a copy the benchmark measures, so a
// row can show predicted beside measured (Runtime::Plan: the same planner
// and calibrated model the copy itself runs with).
#pragma once

#include "daemon/runtime/runtime.h"
#include "tools/bench/bench_report.h"

namespace isometry::bench {

// The predicted GB/s of copying `src` to `dst` on `rt` (with `durable` as
// the copy has it: Runtime::Plan); a Prediction with gbps == 0 and the
// planner's error (or "the model gave no figure") when there is none.
Prediction PredictionOf(const Runtime& rt, const InstanceRef& src, const InstanceRef& dst,
                        bool durable = true);

// `row` with `p` attached.
inline Row WithPrediction(Row row, const Prediction& p) {
  row.predicted = p;
  return row;
}

}  // namespace isometry::bench
