// Small helpers the disk channel's files share: the alignment O_DIRECT
// needs, and thread-safe errno text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace isometry::disk {

inline constexpr uint64_t kAlign = 4096;  // O_DIRECT granularity we require

inline bool Aligned(uint64_t v) { return v % kAlign == 0; }
inline bool Aligned(const std::byte* p) { return reinterpret_cast<uintptr_t>(p) % kAlign == 0; }
inline uint64_t AlignDown(uint64_t v) { return v / kAlign * kAlign; }
inline uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace isometry::disk
