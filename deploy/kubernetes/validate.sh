#!/usr/bin/env bash
# Validates deploy/kubernetes offline (scripts/build-image.sh --kube runs it;
# docs/operations/containers.md, "Validating the manifests"):
#
#   deploy/kubernetes/validate.sh [--out DIR] [--kubectl PATH]
#
# 1. renders base/ and overlays/{cma,disk,monitoring}/ with `kubectl
#    kustomize` (kubectl >= 1.21 for the overlays; Debian 12's kubectl 1.20
#    renders base/ only) into DIR (default: a temporary folder);
# 2. checks every rendered object and examples/*.yaml against the API models
#    of python3-kubernetes (validate_manifests.py: fields, types, required
#    fields, references between objects);
# 3. renders base/isometryd.toml.in with base/render-config.sh for a sample
#    node and parses the result as TOML (the init container's job, without
#    its isometryd --check-config).
# Exits 1 on any problem.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=
kubectl=$(command -v kubectl || true)
while (($#)); do
  case "$1" in
    --out) out=$2; shift ;;
    --kubectl) kubectl=$2; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "validate: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$kubectl" ]] || { echo "validate: needs kubectl (Debian: kubernetes-client) for kustomize" >&2; exit 1; }
/usr/bin/python3 -c 'import yaml, kubernetes' 2>/dev/null ||
  { echo "validate: needs python3-yaml and python3-kubernetes" >&2; exit 1; }
tmp=$(mktemp -d /tmp/isometry-k8s.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=${out:-$tmp}
mkdir -p "$out"

echo "kubectl: $("$kubectl" version --client 2>/dev/null | head -1)"
rendered=()
for k in base overlays/cma overlays/disk overlays/monitoring; do
  f=$out/rendered-${k//\//-}.yaml
  "$kubectl" kustomize "$here/$k" >"$f" 2>"$tmp/err" || { cat "$tmp/err"; echo "validate: kustomize $k failed" >&2; exit 1; }
  echo "kustomize $k: $(grep -c '^kind:' "$f") objects -> $f"
  rendered+=("$f")
done
/usr/bin/python3 "$here/validate_manifests.py" "${rendered[@]}" "$here"/examples/*.yaml

NODE_NAME=node-a HOST_IP=10.1.2.3 ISOMETRY_CMA=1 ISOMETRY_DSK_DIR="$tmp/files" sh -c '
  sed "s|^exec /usr/sbin/isometryd.*|exit 0|" "$1" >"$3/render.sh"
  sh "$3/render.sh" "$2" "$3/isometryd.toml"' sh "$here/base/render-config.sh" \
  "$here/base/isometryd.toml.in" "$tmp"
/usr/bin/python3 - "$tmp/isometryd.toml" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
assert c["runtime"]["node"] == 1 * 65536 + 2 * 256 + 3, c["runtime"]
assert c["cluster"]["node_name"] == "node-a" and c["daemon"]["grpc_tcp"] == "10.1.2.3:7470"
assert c["cluster"]["tls"]["cert_file"] == "/etc/isometry/tls/node-a.pem"
assert [ch["kind"] for ch in c["channel"]] == ["memcpy", "cma", "disk_read", "disk_write"], c["channel"]
assert [(m["name"], m["kind"]) for m in c["memory"]] == [("sys0", "SYS"), ("dsk0", "DSK")], c["memory"]
assert c["memory"][1]["directory"].endswith("/files"), c["memory"]
print("render-config.sh: node-a at 10.1.2.3 -> runtime.node 66051, TLS files of node-a, cma channel, "
      "dsk0 with its disk channels: OK")
PY
echo "validate: OK"
