#!/usr/bin/python3
"""Runs a program under the system call filter of a systemd unit, as
systemd would, without systemd (this machine's PID 1 may not be it).

    syscall_filter.py --unit UNIT [--print] -- PROGRAM ARGS...

Reads every `SystemCallFilter=` line of UNIT (an allow list, then `~`
lines that take calls out of it, as systemd reads them), expands each `@group` with
`systemd-analyze syscall-filter` (nested groups too), installs a seccomp
filter allowing exactly those calls for the native architecture, and execs
PROGRAM. Any other call kills the whole process (SECCOMP_RET_KILL_PROCESS,
the exit status is -SIGSYS): stricter than the unit's
`SystemCallErrorNumber=EPERM` on purpose, so that a call the daemon needs
cannot hide behind a fallback that a test would not notice. To see which
call it was, run the same command under `strace -f` (the last call entered
before "killed by SIGSYS").

--print lists the allowed calls, one a line, and exits.

Exit status 77 (ctest's skip) with the reason on stderr when
systemd-analyze or Debian's python3-seccomp is missing.
"""

import os
import shutil
import sys

# The unit's list as the container's seccomp profile reads it too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from seccomp_profile import allowed_calls, unit_filter  # noqa: E402

SKIP = 77


def skip(reason):
    print(f"syscall_filter: skipped: {reason}", file=sys.stderr)
    sys.exit(SKIP)


def main(argv):
    if "--" not in argv or "--unit" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    options, program = argv[1:split], argv[split + 1:]
    unit = options[options.index("--unit") + 1]
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        skip("no systemd-analyze on this machine (Debian's systemd package)")
    calls = allowed_calls(analyze, *unit_filter(unit))
    if "--print" in options:
        print("\n".join(sorted(calls)))
        return 0
    try:
        import seccomp
    except ImportError:
        skip("no seccomp module (Debian's python3-seccomp, scripts/install-deps.sh)")
    f = seccomp.SyscallFilter(defaction=seccomp.KILL_PROCESS)
    for call in sorted(calls):
        try:
            f.add_rule(seccomp.ALLOW, call)
        except (RuntimeError, ValueError, OSError):
            # A call this libseccomp or this architecture does not know;
            # systemd skips those the same way.
            pass
    f.load()
    os.execv(program[0], program)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
