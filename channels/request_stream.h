// Keeps a channel busy with a stream of requests: what calibration and the
// disk benchmark both do to measure a channel at its own queue depth.
#pragma once

#include <cstdint>
#include <functional>

#include "channels/channel.h"
#include "core/status.h"

namespace isometry {

// Submits make(0), make(1), ... with up to the channel's max_in_flight
// (at least one) outstanding, while more(k) is true for the next index k
// and no request has failed; then waits for every submitted request.
// Returns how many completed, or the first failure. Completions run on the
// channel's threads; `make` and `more` run on the caller's.
Result<uint64_t> StreamRequests(Channel& channel,
                                const std::function<ChannelRequest(uint64_t)>& make,
                                const std::function<bool(uint64_t)>& more);

}  // namespace isometry
