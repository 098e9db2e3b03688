#!/usr/bin/python3
"""isometryd's system calls as its systemd unit lists them, and the seccomp
profile of its container made from them.

Container runtimes' default profiles (Debian 12's containers-common,
recent Docker, containerd) leave io_uring out, so the disk_read and
disk_write channels are absent in a container under them. The profile this
writes (OCI/Docker JSON: podman's --security-opt seccomp=FILE, Kubernetes'
Localhost profiles) allows what the unit's SystemCallFilter= allows, groups
expanded by `systemd-analyze syscall-filter`, io_uring included, and
nothing more. Any other call fails with the unit's SystemCallErrorNumber=
(EPERM), so a path the daemon rarely takes fails its one request with a
logged error instead of killing the daemon.

Usage: seccomp_profile.py [--unit FILE] [--arch ARCH] [--out FILE]
       seccomp_profile.py [--unit FILE] --check FILE
The default unit is systemd/isometryd.service; the default architecture
the machine's (x86_64 or aarch64). --check exits 1 when FILE (written for
the architecture it names) differs from what would be written now: the
committed deploy/container/isometryd-seccomp.json must follow the unit.

tests/install/syscall_filter.py reads the unit with the same functions
(unit_filter, allowed_calls) to run the daemon under exactly these calls.
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_UNIT = os.path.join(ROOT, "systemd", "isometryd.service")

# SystemCallArchitectures=native: the machine's own ABI only.
ARCHES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}
ERRNO = {"EPERM": 1, "ENOSYS": 38}


def unit_filter(unit):
    """(allowed, denied): the tokens of the unit's SystemCallFilter= lines.
    As in systemd, the first line makes an allow list, a later line
    starting with `~` takes calls out of it, and an empty one resets it."""
    allowed, denied = [], []
    with open(unit, encoding="utf-8") as f:
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
    calls, seen, pending = set(), set(), list(tokens)
    while pending:
        token = pending.pop()
        if token.startswith("@"):
            if token not in seen:
                seen.add(token)
                pending += group_members(analyze, token)
        else:
            calls.add(token)
    return calls


def allowed_calls(analyze, allowed, denied):
    """Every call an allow list and its deny lists (unit_filter) leave."""
    return expand(analyze, allowed) - expand(analyze, denied)


def error_number(unit):
    """The errno of a refused call: the unit's SystemCallErrorNumber=."""
    with open(unit, encoding="utf-8") as f:
        names = re.findall(r"^\s*SystemCallErrorNumber=(\S+)", f.read(), flags=re.M)
    name = names[-1] if names else "EPERM"
    if name not in ERRNO:
        raise SystemExit(f"{unit}: SystemCallErrorNumber={name} is not one of {sorted(ERRNO)}")
    return ERRNO[name]


def profile(unit, arch):
    allowed, denied = unit_filter(unit)
    calls = allowed_calls("systemd-analyze", allowed, denied)
    said = " ".join(allowed) + "".join(f" ~{d}" for d in denied)
    return {
        "comment": f"isometryd's system calls: its systemd unit's SystemCallFilter= ({said}), "
                   "written by scripts/seccomp_profile.py; regenerate it, do not edit it",
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": error_number(unit),
        "architectures": [ARCHES[arch]],
        "syscalls": [{"names": sorted(calls), "action": "SCMP_ACT_ALLOW"}],
    }


def render(unit, arch):
    return json.dumps(profile(unit, arch), indent=2) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unit", default=DEFAULT_UNIT)
    ap.add_argument("--arch", default=platform.machine(), choices=sorted(ARCHES))
    ap.add_argument("--out", help="write here (default: standard output)")
    ap.add_argument("--check", metavar="FILE", help="compare FILE with what would be written")
    args = ap.parse_args(argv)
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            have = f.read()
        named = json.loads(have).get("architectures", [ARCHES[args.arch]])
        arch = next((a for a, s in ARCHES.items() if [s] == named), args.arch)
        if have != render(args.unit, arch):
            print(f"{args.check} does not follow {args.unit}: regenerate it with "
                  f"scripts/seccomp_profile.py --arch {arch} --out {args.check}", file=sys.stderr)
            return 1
        return 0
    text = render(args.unit, args.arch)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
