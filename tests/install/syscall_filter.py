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
import re
import shutil
import subprocess
import sys

SKIP = 77


def skip(reason):
    print(f"syscall_filter: skipped: {reason}", file=sys.stderr)
    sys.exit(SKIP)


def unit_filter(unit):
    """(allowed, denied): the tokens of the unit's SystemCallFilter= lines.
    As in systemd, the first line makes an allow list, a later line
    starting with `~` takes calls out of it, and an empty one resets it."""
    allowed, denied = [], []
    with open(unit) as f:
        for line in f:
            m = re.match(r"\s*SystemCallFilter=(.*)$", line)
            if not m:
                continue
            value = m.group(1).strip()
            if not value:
                allowed, denied = [], []
            elif value.startswith("~"):
                if not allowed:
                    raise SystemExit(f"{unit}: a deny list without an allow list before it "
                                     f"({line.strip()}) is not supported here")
                denied += value[1:].split()
            else:
                allowed += value.split()
    if not allowed:
        raise SystemExit(f"{unit}: no SystemCallFilter= allow list")
    return allowed, denied


def group_members(analyze, group):
    """The calls and groups `systemd-analyze syscall-filter GROUP` lists."""
    out = subprocess.run([analyze, "syscall-filter", "--no-pager", group], check=True,
                         capture_output=True, text=True).stdout
    members = []
    for line in out.splitlines()[1:]:  # the first line is the group's name
        word = line.strip()
        if word and not word.startswith("#"):
            members.append(word)
    if not members:
        raise SystemExit(f"systemd-analyze knows no group {group}")
    return members


def expand(analyze, tokens):
    """Every call named by `tokens`, groups expanded recursively."""
    calls, seen, todo = set(), set(), list(tokens)
    while todo:
        token = todo.pop()
        if token.startswith("@"):
            if token not in seen:
                seen.add(token)
                todo += group_members(analyze, token)
        else:
            calls.add(token)
    return calls


def main(argv):
    if "--" not in argv or "--unit" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    options, program = argv[1:split], argv[split + 1:]
    unit = options[options.index("--unit") + 1]
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        skip("no systemd-analyze on this machine (Debian's systemd package)")
    allowed, denied = unit_filter(unit)
    calls = expand(analyze, allowed) - expand(analyze, denied)
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
