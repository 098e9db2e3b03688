// The gpu_read, gpu_write and gpu_copy kinds' descriptors
// (channels/channel_backend.h): what every build knows of them (the
// memory pairs, the model, calibration through GpuMemory). Without probe
// or make: those need CUDA, and channel_factory.cc's table (the one CUDA
// switch) adds them where this build has it.
#pragma once

#include "channels/channel_backend.h"

namespace isometry {

const ChannelBackend& GpuReadBackend();
const ChannelBackend& GpuWriteBackend();
const ChannelBackend& GpuCopyBackend();

}  // namespace isometry
