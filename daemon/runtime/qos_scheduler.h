// Quality of service inside the runtime (config/qos_config.h; docs/guides/
// qos.md): which class's XD a DMA worker issues next, and which waiting
// transfer may take staging buffers.
//
// Dispatch is start-time fair queuing over bytes: each class has a virtual
// finish tag per channel, advanced by a request's bytes over the class's
// weight; the worker issues the runnable class with the smallest start tag
// (max of its finish tag and the worker's virtual time), and within a
// class the first runnable XD of the pool (priority first, equal
// priorities in turn). A class that was idle starts at the worker's
// virtual time, so it gets no credit for the time it sent nothing. Caps
// per class and channel kind hold a class back: requests in flight, and a
// rate paced at dispatch (a class may run ahead of its rate by
// kQosBurst); a cap of 0 pauses it. With one class and no caps the worker
// issues exactly what it did before classes existed.
//
// Everything here is guarded by the runtime's `mu` (runtime_impl.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "config/qos_config.h"

namespace isometry {

using QosClock = std::chrono::steady_clock;

// How far ahead of its rate cap a class may run after a pause.
inline constexpr std::chrono::milliseconds kQosBurst{20};

// One class as one channel applies it.
struct QosLimits {
  uint32_t weight = 1;
  int nice = 0;                   // of the threads moving its bytes (core/thread_nice.h)
  uint64_t rate_bytes_per_s = 0;  // 0: no rate cap (see paused)
  int in_flight = std::numeric_limits<int>::max();
  bool paused = false;  // a cap of 0
  bool capped() const {
    return paused || rate_bytes_per_s || in_flight != std::numeric_limits<int>::max();
  }
};

// The classes in force, constant once made; a reload makes a new one.
// Class numbers never change while the runtime lives: a class a reload
// drops stays, retired (weight 1, no caps), for the transfers still in it;
// new copies naming it go to the default class.
struct QosTable {
  struct Class {
    std::string name;
    uint32_t weight = 1;
    int32_t max_priority = std::numeric_limits<int32_t>::max();
    int nice = 0;
    bool retired = false;
    std::vector<QosLimits> per_channel;  // by channel index
  };
  std::vector<Class> classes;
  size_t default_class = 0;
  // Some channel has a cap, or there are two classes or more: the workers
  // take the general path.
  bool trivial = true;

  // `config`'s classes for channels of `kinds`, keeping the numbers of
  // `previous` (null: none yet).
  static std::shared_ptr<const QosTable> Make(const QosConfig& config,
                                              const std::vector<ChannelKind>& kinds,
                                              const QosTable* previous);
  // A class by name; the default class for "" or a name not in force.
  size_t Find(const std::string& name) const;
};

// A class's state on one channel.
struct QosShare {
  double finish_tag = 0;  // virtual time, bytes / weight
  int in_flight = 0;
  QosClock::time_point next_allowed{};  // rate pacing
  uint64_t bytes = 0;                   // dispatched, ever
  uint64_t requests = 0;
  // Held back by a cap while it had a runnable XD: the total, and since
  // when (epoch: not now).
  double throttled_s = 0;
  QosClock::time_point throttled_since{};
  // Bytes dispatched lately, decayed with a 1 s time constant: the class's
  // current share of the channel.
  double recent = 0;
  QosClock::time_point recent_at{};
};

// A DMA worker's classes (DmaWorker::qos).
struct QosWorker {
  std::vector<QosShare> shares;  // by class number
  double virtual_time = 0;
  std::vector<uint8_t> seen;  // scratch for Pick

  void Resize(size_t classes);
  // Whether `limits` holds class `c` back now; sets `wake` to when a rate
  // cap lets it go, if sooner. Opens or closes its throttled interval.
  bool HeldBack(size_t c, const QosLimits& limits, QosClock::time_point now,
                QosClock::time_point& wake);
  // The start tag class `c` would get now.
  double StartTag(size_t c) const;
  // Accounts a request of `bytes` issued for class `c` now.
  void Charge(size_t c, const QosLimits& limits, uint64_t bytes, QosClock::time_point now);
  // The recent rate of class `c` decayed to `now` (bytes per second).
  double RecentRate(size_t c, QosClock::time_point now) const;
  double ThrottledSeconds(size_t c, QosClock::time_point now) const;
};

}  // namespace isometry
