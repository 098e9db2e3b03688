#include "core/memory.h"

#include "core/status.h"
#include "core/strings.h"

namespace isometry {

std::string_view MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kSys:
      return "SYS";
    case MemoryKind::kReg:
      return "REG";
    case MemoryKind::kZcm:
      return "ZCM";
    case MemoryKind::kFbm:
      return "FBM";
    case MemoryKind::kDsk:
      return "DSK";
    case MemoryKind::kProcess:
      return "PROC";
  }
  return "?";
}

std::optional<MemoryKind> ParseMemoryKind(std::string_view name) {
  const std::string upper = AsciiUpper(name);
  for (MemoryKind k : {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm, MemoryKind::kFbm,
                       MemoryKind::kDsk, MemoryKind::kProcess}) {
    if (upper == MemoryKindName(k)) {
      return k;
    }
  }
  return std::nullopt;
}

bool IsHostMemory(MemoryKind kind) {
  return kind == MemoryKind::kSys || kind == MemoryKind::kReg || kind == MemoryKind::kZcm;
}

std::string ToString(MemoryId id) { return StrCat(id.node, ":", id.memory); }

}  // namespace isometry
