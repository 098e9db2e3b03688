// The operator token isoctl sends (what lets it cancel other clients'
// transfers): read from a file the daemon writes, readable by its user only.
#pragma once

#include <string>

#include "core/status.h"

namespace isometry::isoctl {

// Reads the token: the first line of `path`.
//
// `named`: the user named the file (--operator-token or
// ISOMETRY_OPERATOR_TOKEN). A named file that cannot be read or holds no
// token is a usage error that says why: whoever names it expects operator
// rights, and a silent "not an operator" would surface only later, as a
// puzzling PERMISSION_DENIED. An empty `path` names no file (no token).
//
// The implicit default path gives "" (not an operator) when it does not
// exist, or when this user may not read it: the daemon makes it readable
// by its own user only, so for everyone else that is the normal case.
Result<std::string> ReadOperatorToken(const std::string& path, bool named);

}  // namespace isometry::isoctl
