// The zero-copy limit of a passive source without XPMEM: this process
// reads the peer's runs straight into its own with process_vm_readv, one
// iovec per contiguous run on each side (FALCON-X's naive CMA zero-copy,
// no daemon, no pack), in batches of at most IOV_MAX iovecs a side. The
// batches are built once: only the system calls are timed, as a program
// that memoizes its iovecs would run them.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/datatype.h"

namespace isometry::bench {

class CmaDirect {
 public:
  // `count` elements of `send` at the peer `pid`'s address `remote` into
  // `count_recv` elements of `recv` at `local` (this process). Dies on
  // types whose runs cannot be listed or lie at negative offsets.
  CmaDirect(pid_t pid, uint64_t remote, const Datatype& send, int64_t count, std::byte* local,
            const Datatype& recv, int64_t count_recv);

  // One message: every batch, each read whole (a short read is a failure:
  // the peer's range is resident and stays mapped).
  void Copy() const;

 private:
  struct Batch {
    std::vector<iovec> local, remote;
    ssize_t bytes = 0;
  };
  pid_t pid_;
  std::vector<Batch> batches_;
};

}  // namespace isometry::bench
