// Keeps channel calibrations in the state directory, tagged with a
// hardware fingerprint, so a restart on the same machine reuses them and a
// different machine (or a changed channel config) measures again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "channels/calibrate.h"
#include "config/runtime_config.h"

namespace isometry {

// CPU model, core count, memory size, each channel's config (kind,
// threads, in-flight limit, request size, rate cap) and each DSK memory's
// directory and device: what the figures depend on.
std::string HardwareFingerprint(const RuntimeConfig& config);

// Reads `path`; NotFound when absent, FailedPrecondition when it was made
// for another fingerprint, InvalidArgument when malformed.
Result<Calibration> LoadCalibration(const std::string& path, const std::string& fingerprint);
// Writes atomically (temporary file, then rename).
Status SaveCalibration(const std::string& path, const std::string& fingerprint,
                       const Calibration& calibration);

}  // namespace isometry
