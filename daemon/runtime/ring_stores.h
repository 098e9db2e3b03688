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
// loops and plans"). So calibration picks the start; every ring chunk
// whose two hops were both timed counts what it cost the pipeline (the
// runtime's figure: the time a byte holds the busier channel's threads);
// and one chunk in kTryEvery goes the way not preferred, so that a change
// is seen. The preference turns only when the other way has cost clearly
// less (kTurnBelow): where the two cost about the same, chunk times are
// noisier than the difference, and a choice that followed every wobble
// would try the dearer way half the time.
//
// Not thread-safe: the runtime calls it under its own lock.
#pragma once

#include <cstdint>

namespace isometry {

class RingStores {
 public:
  // One chunk in this many is written the way not preferred: rare
  // enough that trying the wrong way costs a pipeline little (a chunk in
  // kTryEvery at its price), often enough that a 1 GiB copy in 4 MiB
  // chunks tries it eight times.
  static constexpr uint64_t kTryEvery = 32;
  // The other way takes over when its cost falls below this share of the
  // preferred way's.
  static constexpr double kTurnBelow = 0.75;

  // `streams_first`: what calibration found faster (false: cached, also
  // when it measured nothing).
  explicit RingStores(bool streams_first = false) : prefers_(streams_first) {}

  // A new calibration: its choice first again, and the costs timed so far
  // forgotten (the counts below stay).
  void Restart(bool streams_first);

  // Whether the next ring chunk is written with streaming stores.
  bool NextStreams();

  // A chunk written `streamed` (or not) and read back cost the pipeline
  // `ns_per_byte`; 0 or less: not timed, ignored.
  void Observe(bool streamed, double ns_per_byte);

  // The way preferred now (true: streaming).
  bool Prefers() const { return prefers_; }

  uint64_t chunks_timed() const { return timed_; }
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
