#!/usr/bin/env bash
# `podman kube play` of the rendered base DaemonSet (scripts/build-image.sh
# --kube runs it after validate.sh; docs/operations/containers.md):
#
#   deploy/kubernetes/podman_play.sh OUT IMAGE UID [PODMAN RUN OPTIONS...]
#
# Podman 4.3 plays Pod, Deployment, PersistentVolumeClaim and ConfigMap, not
# DaemonSet, Service or Secret. So the DaemonSet's pod template becomes a Pod
# (what a DaemonSet runs on each node), with what a kubelet would fill in
# written out: NODE_NAME and HOST_IP (podman's fieldRef knows metadata only),
# the pod's runAsUser on each container (podman reads it per container), the
# hostPaths under OUT (not this machine's /run/isometry), the Secret
# isometry-tls as a hostPath of a test CA (scripts/make-test-ca.sh) and the
# image; the ports go (podman refuses port mappings with hostNetwork). Then: the init containers run, the daemon comes up as isometry, its
# liveness probe (podman's healthcheck) passes, and isoctl status answers
# from a second container that shares the socket directory.
set -euo pipefail

[[ $# -ge 3 && "$1" != -h && "$1" != --help ]] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
out=$1 image=$2 uid=$3
shift 3
run_opts=("$@")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rendered=$out/rendered-base.yaml
[[ -f "$rendered" ]] || { echo "podman_play: no $rendered (run validate.sh --out $out)" >&2; exit 1; }
play=$out/play
node=podman-node
# A loopback address of its own: the pod uses the host's network, and the
# ports (7470, 7471, 9464) must not meet another daemon's on 127.0.0.1.
host_ip=127.46.47.48

podman kube down "$play/pod.yaml" >/dev/null 2>&1 || true
rm -rf "$play" && mkdir -p "$play/run" "$play/state" "$play/tls"
"$root/scripts/make-test-ca.sh" "$play/tls" "$node" >/dev/null 2>&1
rm -f "$play/tls/ca.key"  # the CA's key stays out of the node's volume
# What the Secret volume's defaultMode 0440 and fsGroup would give.
chgrp "$uid" "$play/tls"/* && chmod 0440 "$play/tls"/*

/usr/bin/python3 - "$rendered" "$play" "$image" "$node" "$host_ip" <<'PY'
import sys
import yaml

rendered, play, image, node, host_ip = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
spec = ds["spec"]["template"]["spec"]
pod_sc = spec.pop("securityContext", {})
for c in spec.get("initContainers", []) + spec["containers"]:
    c["image"] = image
    # Podman maps container ports even with hostNetwork, and refuses both.
    c.pop("ports", None)
    sc = c.setdefault("securityContext", {})
    for k in ("runAsUser", "runAsGroup"):
        sc.setdefault(k, pod_sc.get(k))
    for e in c.get("env", []):
        path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if path in ("spec.nodeName", "status.hostIP"):
            e.pop("valueFrom")
            e["value"] = node if path == "spec.nodeName" else host_ip
for v in spec["volumes"]:
    if v["name"] in ("run", "state"):
        v["hostPath"]["path"] = f"{play}/{v['name']}"
    if "secret" in v:
        del v["secret"]
        v["hostPath"] = {"path": f"{play}/tls", "type": "Directory"}
# etcd: a name that resolves nowhere here; a closed local port instead
# (the daemon starts without etcd and keeps trying).
cm["data"]["isometryd.toml.in"] = cm["data"]["isometryd.toml.in"].replace(
    "isometry-etcd.isometry.svc.cluster.local:2379", "127.0.0.1:1")
# Podman 4.3 removes a "once" init container right after it exits and,
# with runc here, finds it still running and gives up: "always" keeps them.
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "isometryd-" + node, "labels": ds["spec"]["template"]["metadata"]["labels"],
                    "annotations": {"io.podman.annotations.init.container.type": "always"}},
       "spec": spec}
cm["metadata"].pop("namespace", None)
yaml.safe_dump_all([cm, pod], open(f"{play}/pod.yaml", "w"), sort_keys=False)
print(f"podman_play: Pod {pod['metadata']['name']} from DaemonSet/{ds['metadata']['name']}, "
      f"ConfigMap {cm['metadata']['name']} -> {play}/pod.yaml")
PY

# Podman's kube play takes no --runtime or --ulimit: pass them in a
# containers.conf of our own (the same options build-image.sh gives run).
conf=$play/containers.conf
{
  echo "[containers]"
  ulimits=()
  for ((i = 0; i < ${#run_opts[@]}; i++)); do
    [[ "${run_opts[i]}" == --ulimit ]] && ulimits+=("\"${run_opts[i + 1]}\"")
  done
  ((${#ulimits[@]})) && echo "default_ulimits = [$(IFS=,; echo "${ulimits[*]}")]"
  echo "[engine]"
  for ((i = 0; i < ${#run_opts[@]}; i++)); do
    [[ "${run_opts[i]}" == --runtime ]] && echo "runtime = \"${run_opts[i + 1]}\""
  done
} >"$conf"
export CONTAINERS_CONF=$conf
# kube down may leave the pod (its init containers restarting meanwhile)
# and leaves the volumes podman made for the ConfigMap and the emptyDir.
cleanup() {
  podman kube down "$play/pod.yaml" >/dev/null 2>&1 || true
  podman pod rm -f "isometryd-$node" >/dev/null 2>&1 || true
  podman volume ls -q | grep -E '^(isometryd-config-.*|node-config)$' |
    xargs -r podman volume rm -f >/dev/null 2>&1 || true
}
trap cleanup EXIT
podman kube play --replace "$play/pod.yaml" >"$play/play.log" 2>&1 ||
  { cat "$play/play.log"; echo "podman_play: podman kube play failed" >&2; exit 1; }
ctr=isometryd-$node-isometryd
# Up to 60 s: a first start calibrates the channels before it listens
# (seconds on an idle machine, more on a loaded one).
for _ in $(seq 120); do
  [[ -S "$play/run/grpc.sock" ]] && break
  sleep 0.5
done
podman ps -a --pod --format '{{.Names}} {{.Status}}' | grep "isometryd-$node" || true
if [[ ! -S "$play/run/grpc.sock" ]]; then
  for c in $(podman ps -a --format '{{.Names}}' | grep "isometryd-$node"); do
    echo "--- $c"; podman logs "$c" 2>&1 | tail -15
  done
  echo "podman_play: the daemon did not come up" >&2
  exit 1
fi
podman logs "$ctr-config" 2>/dev/null | tail -3 || true
duid=$(stat -c %u "/proc/$(podman inspect -f '{{.State.Pid}}' "$ctr")")
[[ "$duid" == "$uid" ]] || { echo "podman_play: isometryd runs as uid $duid, not $uid" >&2; exit 1; }
echo "podman_play: isometryd runs as uid $duid; sockets: $(stat -c 'uid %u gid %g mode %a' "$play/run/grpc.sock")"
ok=0
for _ in $(seq 10); do
  podman healthcheck run "$ctr" >/dev/null 2>&1 && { ok=1; break; }
  sleep 1
done
((ok)) || { echo "podman_play: the liveness probe (grpc.health.v1 on the socket) fails" >&2; exit 1; }
echo "podman_play: liveness probe (grpc.health.v1 Check on the socket): SERVING"
podman run --rm "${run_opts[@]}" -v "$play/run:/run/isometry" --user 1000:1000 --group-add "$uid" \
  "$image" isoctl status | head -8
echo "podman_play: isoctl status from a client container: ok"
