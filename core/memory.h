// Memories: where data lives. A memory id is cluster-wide: (node, memory).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace isometry {

// Memory kinds of Isometry table 1, plus client process memory reached by CMA.
enum class MemoryKind : uint8_t {
  kSys,      // plain host memory
  kReg,      // host memory registered with the NIC
  kZcm,      // host memory pinned for GPU access
  kFbm,      // GPU framebuffer memory
  kDsk,      // files under a directory
  kProcess,  // another client process's memory, reached by CMA
};

std::string_view MemoryKindName(MemoryKind kind);
// Accepts "SYS", "sys", ...; nullopt for an unknown name.
std::optional<MemoryKind> ParseMemoryKind(std::string_view name);
// True for memories the CPU can load and store directly (SYS, REG, ZCM).
bool IsHostMemory(MemoryKind kind);

struct MemoryId {
  uint32_t node = 0;
  uint32_t memory = 0;
  // The global memory order used for deadlock-free buffer allocation
  // (Isometry §3.6) is this lexicographic order. (clang-tidy 14 reads the
  // 0 that a defaulted <=> compares with as a null pointer constant.)
  auto operator<=>(const MemoryId&) const = default;  // NOLINT(modernize-use-nullptr)
};

std::string ToString(MemoryId id);

}  // namespace isometry
