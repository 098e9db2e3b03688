// The files of one checkpoint (Active Access, issue #19): the base image
// and its delta chain (active/checkpoint_delta.h), both opened beneath a
// DSK memory's directory. Blocking I/O on the calling thread; every short
// read or write is resumed, every error names the file and offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "active/checkpoint_delta.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

class DiskMemory;

struct CheckpointFiles {
  UniqueFd base, delta;
  std::string shown, shown_delta;  // "memory:file" for messages
  uint64_t base_bytes = 0, delta_bytes = 0;

  // Opens (creating with `create`) `file` and `file`.delta under the
  // memory's directory: each must be a regular file with one link (unless
  // the memory allows hard links). NOT_FOUND for a missing base without
  // `create`.
  static Result<CheckpointFiles> Open(const DiskMemory& disk, const std::string& file, bool create);
};

// What a scan of the chain's headers found: records and where they end.
struct DeltaTail {
  uint64_t records = 0;
  uint64_t end = 0;
};
// Walks the headers only (not the payloads): the sequence, the image size
// and that every payload lies inside the file. Any damage is an error.
Result<DeltaTail> ScanDeltaHeaders(int fd, uint64_t file_bytes, uint64_t image_bytes,
                                   const std::string& shown);

Status PWriteAll(int fd, const std::byte* data, uint64_t n, uint64_t offset,
                 const std::string& shown);
// DATA_LOSS where the file ends before `n` bytes.
Status PReadAll(int fd, std::byte* data, uint64_t n, uint64_t offset, const std::string& shown);
Status SyncData(int fd, const std::string& shown);

// The whole chain, read and checked for an image of `image_bytes`.
struct DeltaChain {
  std::vector<std::byte> bytes;
  std::vector<active::DeltaRecordView> records;
};
Result<DeltaChain> ReadDeltaChain(const CheckpointFiles& f, uint64_t image_bytes);

// Writes the chain into the base, syncs it, then empties the chain and
// syncs that: a crash in between leaves a chain that replays to the same
// image. Returns the pages applied.
Result<uint64_t> CompactDeltaChain(CheckpointFiles& f);

}  // namespace isometry
