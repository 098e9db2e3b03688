// A producer and a consumer job of one isometryd holding a 2-D array of
// doubles in ScaLAPACK's 2-D block-cyclic layout, for checking and timing
// Isometry's Redistribute against pdgemr2d (tools/bench/
// scalapack_redistribute.c). Grids are row-major (grid rank = row * q +
// col, BLACS "R"), the first block on process (0, 0), and every rank's
// local array column-major with its leading dimension the local row
// count, as ScaLAPACK keeps them. Element (i, j) holds i * n + j.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/status.h"

namespace isometry::bench {

struct BlockCyclic2d {
  uint64_t p = 1, q = 1;    // process grid
  uint64_t mb = 1, nb = 1;  // block
};

struct Redistribution2d {
  uint64_t m = 0, n = 0;  // global rows, columns
  BlockCyclic2d from, to;
};

// Local extent of `extent` indices in blocks of `block` on process
// `coord` of `procs` (ScaLAPACK's numroc with the source process 0).
uint64_t LocalExtent(uint64_t extent, uint64_t block, uint64_t procs, uint64_t coord);

// The two jobs: every rank its own session of this process (one process,
// many sessions: the daemon sees seven clients), its local array in the
// daemon's pool or, with `private_memory`, in this process's heap
// registered as private memory. Not thread-safe.
class BlockCyclicJobs {
 public:
  // Connects p*q sessions per side, allocates and fills the producer's
  // arrays, zeroes the consumer's, and joins distributed instances
  // `name`-producer and `name`-consumer.
  static Result<std::unique_ptr<BlockCyclicJobs>> Start(const std::string& socket,
                                                        const Redistribution2d& r,
                                                        const std::string& name,
                                                        bool private_memory);
  // One Redistribute from the producer into the consumer, started by the
  // consumer's rank 0, waited for.
  Status Run();
  // Consumer rank `rank`'s local array (column-major); empty for a rank
  // that holds nothing.
  std::span<const double> Consumer(uint64_t rank) const;
  // Consumer elements that differ from i * n + j.
  uint64_t Mismatches() const;

 private:
  struct Rank {
    std::unique_ptr<client::Client> client;
    std::optional<client::Allocation> alloc;
    std::vector<double> own;
    std::optional<client::Instance> inst;
    double* data = nullptr;
    uint64_t rows = 0, cols = 0;
  };
  BlockCyclicJobs() = default;
  Status Join(const std::string& socket, const BlockCyclic2d& g, const std::string& name,
              bool producer, bool private_memory, std::vector<Rank>* out) const;

  Redistribution2d r_;
  std::string producer_, consumer_;
  std::vector<Rank> from_, to_;
};

}  // namespace isometry::bench
