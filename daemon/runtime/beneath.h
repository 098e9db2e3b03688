// Opening files confined to a directory fd, with no symbolic links.
//
// Every DSK file step resolves a client-supplied relative name against the
// DSK directory's fd, opened once when the runtime starts. The kernel does
// the confinement: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS) refuses `..` leaving the directory, absolute
// names, and any symbolic link in any component ("a/b.dat" cannot escape
// through a symlinked "a", nor read through one that stays inside). A
// directory swapped for a link between two calls cannot redirect the
// second one.
//
// On a kernel without openat2 (before 5.6; the first call logs it once)
// the same rules hold by walking the name one component at a time with
// openat(O_NOFOLLOW), refusing `..` and links at each step.
#pragma once

#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

// Opens `relative` under `dir_fd` with `flags` (O_CLOEXEC is added; the
// mode for O_CREAT is 0644). `shown` names the file in errors. Errors:
// PermissionDenied for a name that leaves the directory or passes through
// (or is) a symbolic link; otherwise the errno's code, with the name.
// With O_PATH | O_NOFOLLOW a last component that is a link is returned as
// the link itself (for the caller to refuse with its own message).
// `resolver`: kAuto is openat2 where the kernel has it; kWalk forces the
// fallback (tests run both on the same cases).
enum class Resolver { kAuto, kWalk };
Result<UniqueFd> OpenBeneath(int dir_fd, const std::string& relative, int flags,
                             const std::string& shown, Resolver resolver = Resolver::kAuto);

// Whether openat2 was used (false once the fallback was chosen).
bool HaveOpenat2();

}  // namespace isometry
