#!/usr/bin/python3
"""Checks rendered Kubernetes manifests offline (deploy/kubernetes/validate.sh
runs it on each kustomization's output; docs/operations/containers.md).

    validate_manifests.py FILE.yaml [FILE.yaml ...]

Schema: every object of a built-in kind is checked against the API models of
Debian's python3-kubernetes (generated from the Kubernetes OpenAPI schema of
its release): every field must exist in its type (no unknown or misspelt
keys), every value must have the field's type (string, integer, boolean,
list, map, nested object), and every required field must be present (the
models' constructors refuse a missing one). Kinds the models do not have
(the Prometheus Operator's ServiceMonitor) get a check of the fields their
CRD requires.

References: volume mounts name volumes of their pod; configMap volumes
name a ConfigMap of the same files (Secrets may be external: listed); a
DaemonSet's selector matches its template's labels; container port names
are unique IANA_SVC_NAMEs; a Service selects a workload and its targetPort
names a container port; a ServiceMonitor selects a Service and names one
of its ports. Prints what it checked; exits 1 on any problem.
"""
import re
import sys

import yaml

try:
    import kubernetes.client as models
    from kubernetes.client import Configuration
except ImportError:
    sys.exit("validate_manifests: needs python3-kubernetes (apt-get install python3-kubernetes)")

SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float)}
PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


class Checker:
    def __init__(self):
        self.problems = []
        self.fields = 0
        self.config = Configuration()
        self.config.client_side_validation = True

    def problem(self, where, text):
        self.problems.append(f"{where}: {text}")

    def value(self, value, typ, where):
        """Checks VALUE against the python3-kubernetes type name TYP."""
        self.fields += 1
        if value is None:
            return
        if typ.startswith("list["):
            if not isinstance(value, list):
                return self.problem(where, f"expected a list, got {type(value).__name__}")
            for i, item in enumerate(value):
                self.value(item, typ[5:-1], f"{where}[{i}]")
        elif typ.startswith("dict("):
            if not isinstance(value, dict):
                return self.problem(where, f"expected a map, got {type(value).__name__}")
            inner = typ[5:-1].split(", ", 1)[1]
            for k, v in value.items():
                self.value(v, inner, f"{where}.{k}")
        elif typ in SCALARS:
            ok = isinstance(value, SCALARS[typ]) and not (typ != "bool" and isinstance(value, bool))
            if not ok:
                self.problem(where, f"expected {typ}, got {type(value).__name__} {value!r}")
        elif typ in ("object", "datetime", "date"):
            pass  # int-or-string, quantities, raw extensions, timestamps
        else:
            self.model(value, typ, where)

    def model(self, value, typ, where):
        cls = getattr(models, typ, None)
        if cls is None:
            return self.problem(where, f"no model {typ} in python3-kubernetes")
        if not isinstance(value, dict):
            return self.problem(where, f"expected an object ({typ}), got {type(value).__name__}")
        by_json = {j: a for a, j in cls.attribute_map.items()}
        kwargs = {}
        for key, v in value.items():
            attr = by_json.get(key)
            if attr is None:
                self.problem(where, f"unknown field '{key}' in {typ}")
                continue
            self.value(v, cls.openapi_types[attr], f"{where}.{key}")
            # Scalars as they are (setters check enums); objects as a stand-in.
            kwargs[attr] = v if not isinstance(v, (dict, list)) else object()
        try:
            cls(local_vars_configuration=self.config, **kwargs)
        except (ValueError, TypeError) as e:
            self.problem(where, f"{typ}: {e}")


def model_name(api_version, kind):
    version = api_version.split("/")[-1]
    return version[0].upper() + version[1:] + kind


def pod_specs(doc):
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "Pod":
        yield doc.get("metadata", {}).get("name"), spec, doc.get("metadata", {}).get("labels", {})
    elif kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"):
        t = spec.get("template") or {}
        yield doc["metadata"]["name"], t.get("spec") or {}, (t.get("metadata") or {}).get("labels", {})


def references(c, docs, external_secrets):
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    workloads = []
    for d in docs:
        for name, spec, labels in pod_specs(d):
            where = f"{d['kind']}/{name}"
            workloads.append((labels, spec))
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            for ctr in spec.get("initContainers", []) + spec.get("containers", []):
                cw = f"{where} container {ctr.get('name')}"
                if not ctr.get("image"):
                    c.problem(cw, "no image")
                for m in ctr.get("volumeMounts", []):
                    if m.get("name") not in volumes:
                        c.problem(cw, f"mounts volume '{m['name']}' the pod does not have")
                names = [p.get("name") for p in ctr.get("ports", []) if p.get("name")]
                for n in names:
                    if len(n) > 15 or not PORT_NAME.match(n):
                        c.problem(cw, f"port name '{n}' is not an IANA_SVC_NAME")
                if len(names) != len(set(names)):
                    c.problem(cw, "port names repeat")
            for v in volumes.values():
                if "configMap" in v:
                    cm = v["configMap"]["name"]
                    if cm not in configmaps:
                        c.problem(where, f"volume '{v['name']}' names ConfigMap '{cm}', not in the output")
                if "secret" in v:
                    external_secrets.add(v["secret"]["secretName"])
            if d["kind"] == "DaemonSet":
                sel = (d["spec"].get("selector") or {}).get("matchLabels", {})
                if any(labels.get(k) != val for k, val in sel.items()):
                    c.problem(where, f"selector {sel} does not match the template's labels {labels}")
    services = [d for d in docs if d.get("kind") == "Service"]
    for s in services:
        sel = s["spec"].get("selector", {})
        hits = [spec for labels, spec in workloads if all(labels.get(k) == v for k, v in sel.items())]
        if not hits:
            c.problem(f"Service/{s['metadata']['name']}", f"selector {sel} selects no workload here")
        for p in s["spec"].get("ports", []):
            tp = p.get("targetPort")
            if isinstance(tp, str) and not any(
                    tp == cp.get("name") for spec in hits
                    for ctr in spec.get("containers", []) for cp in ctr.get("ports", [])):
                c.problem(f"Service/{s['metadata']['name']}", f"targetPort '{tp}' is no container's port")
    for m in (d for d in docs if d.get("kind") == "ServiceMonitor"):
        where = f"ServiceMonitor/{m['metadata']['name']}"
        spec = m.get("spec") or {}
        if not isinstance(spec.get("endpoints"), list) or not isinstance(spec.get("selector"), dict):
            c.problem(where, "spec.endpoints (list) and spec.selector (object) are required")
            continue
        sel = spec["selector"].get("matchLabels", {})
        chosen = [s for s in services
                  if all(s["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
        if not chosen:
            c.problem(where, f"selector {sel} selects no Service here")
        for e in spec["endpoints"]:
            if not isinstance(e, dict) or not (e.get("port") or e.get("targetPort")):
                c.problem(where, "an endpoint without port or targetPort")
            elif e.get("port") and not any(e["port"] == p.get("name")
                                           for s in chosen for p in s["spec"].get("ports", [])):
                c.problem(where, f"endpoint port '{e['port']}' is no port of the selected Service")


def main(paths):
    if not paths:
        sys.exit(__doc__)
    total = 0
    for path in paths:
        c = Checker()
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
        except (OSError, yaml.YAMLError) as e:
            print(f"{path}: cannot read: {e}")
            total += 1
            continue
        kinds = []
        for d in docs:
            kind, api = d.get("kind"), d.get("apiVersion", "")
            where = f"{path}: {kind}/{(d.get('metadata') or {}).get('name')}"
            if not kind or not api:
                c.problem(where, "no kind or apiVersion")
                continue
            kinds.append(kind)
            name = model_name(api, kind)
            if "." in api.split("/")[0] and not hasattr(models, name):
                continue  # a CRD's kind: checked by references()
            c.model(d, name, where)
        external = set()
        references(c, docs, external)
        for p in c.problems:
            print(f"  {p}")
        print(f"{path}: {len(docs)} objects ({', '.join(kinds)}), {c.fields} fields checked against "
              f"python3-kubernetes {models.__version__ if hasattr(models, '__version__') else ''}"
              f"{'; external Secrets: ' + ', '.join(sorted(external)) if external else ''}: "
              f"{'OK' if not c.problems else str(len(c.problems)) + ' problems'}")
        total += len(c.problems)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
