// Which way a memcpy hop writes the ring that the next memcpy hop reads:
// with cached stores, which hand the lines over in a cache the two cores
// share, or with streaming ones, which send them to memory for the reader
// to fetch there.
//
// Why not once, at calibration: which is faster depends on where the two
// copy threads run and what the cores share, and on a VM that changes
// while the daemon runs: on one, the faster way flipped for minutes at a
// time, and a pipeline that kept calibration's choice ran far below the
// other way meanwhile (docs/benchmarks/design-measurements.md, "Copy
// loops and plans"). So calibration picks the start; a ring is written in
// epochs of kEpochChunks chunks, each one way; the runtime times how long
// each epoch took to arrive through the ring (the pipeline's own pace:
// the copies' own times did not predict it); and one epoch in kTryEvery
// goes the way not preferred, so that a change is seen. The preference
// turns only when the other way has cost clearly less (kTurnBelow): where
// the two cost about the same, the timings are noisier than the
// difference, and a choice that followed every wobble would spend half
// its epochs the dearer way.
//
// Not thread-safe: the runtime calls it under its own lock.
#pragma once

#include <cstdint>

namespace isometry {

class RingStores {
 public:
  // Chunks a ring writes one way before the next pick: enough that the
  // slots still holding the previous epoch's chunks (a ring's depth) blur
  // its timing little.
  static constexpr uint64_t kEpochChunks = 8;
  // One epoch in this many is written the way not preferred: rare enough
  // that trying the wrong way costs a pipeline little, often enough that
  // a 1 GiB copy in 4 MiB chunks (32 epochs) tries it twice. The first
  // try comes at the third epoch (the first is not timed, the second
  // times the preferred way), so that a daemon finds a much faster way
  // within its first large copy.
  static constexpr uint64_t kTryEvery = 16;
  // The other way takes over when its cost falls below this share of the
  // preferred way's.
  static constexpr double kTurnBelow = 0.75;

  // `streams_first`: what calibration found faster (false: cached, also
  // when it measured nothing).
  explicit RingStores(bool streams_first = false) : prefers_(streams_first) {}

  // A new calibration: its choice first again, and the costs timed so far
  // forgotten (the counts below stay).
  void Restart(bool streams_first);

  // Whether the next epoch is written with streaming stores.
  bool NextStreams();

  // An epoch written `streamed` (or not) took `ns_per_byte` to arrive
  // through its ring; 0 or less: not timed, ignored.
  void Observe(bool streamed, double ns_per_byte);

  // The way preferred now (true: streaming).
  bool Prefers() const { return prefers_; }

  // Epochs timed so far.
  uint64_t epochs_timed() const { return timed_; }
  // Times the preference turned.
  uint64_t switches() const { return switches_; }

 private:
  bool prefers_;
  double cost_[2] = {0, 0};  // ns per byte, a moving average; 0: never timed
  uint64_t picks_ = 0;
  uint64_t timed_ = 0;
  uint64_t switches_ = 0;
};

}  // namespace isometry
