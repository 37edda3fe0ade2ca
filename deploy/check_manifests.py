#!/usr/bin/env python3
"""validates every kubernetes manifest under deploy/ offline against the kubernetes schemas
(kubernetes-validate ships them), directly and as each kustomize overlay renders.

overlays are rendered by a small strategic-merge of our own (lists of named items merge by name),
and additionally by `kubectl kustomize` when kubectl is installed. exit 0 when everything is valid.
"""
import copy
import os
import shutil
import subprocess
import sys

import kubernetes_validate
import yaml

ROOT = os.path.dirname(os.path.abspath(__file__))
K8S_VERSION = os.environ.get("K8S_VERSION", "1.30.0")
# custom resources without a schema in kubernetes-validate: checked by hand below.
CRDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("monitoring.coreos.com/v1", "ServiceMonitor")}
failures = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def check_crd(where, doc, pods_ports):
    if doc.get("kind") == "PodMonitor":
        eps = doc.get("spec", {}).get("podMetricsEndpoints") or []
        if not eps:
            fail(where, "PodMonitor without podMetricsEndpoints")
        for ep in eps:
            if ep.get("port") not in pods_ports:
                fail(where, f"PodMonitor port {ep.get('port')!r} is not a container port name")
    if not doc.get("spec", {}).get("selector", {}).get("matchLabels"):
        fail(where, "monitor without spec.selector.matchLabels")


def validate(where, doc, pods_ports=()):
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRDS:
        check_crd(where, doc, pods_ports)
        return
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        fail(where, f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}: {e.message} at {list(e.path)}")
    except kubernetes_validate.SchemaNotFoundError as e:
        fail(where, f"no schema for {key}: {e}")


def merge(base, patch):
    """strategic merge: dicts recursively, lists of dicts with 'name' merged by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            out[k] = merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and patch
            and all(isinstance(x, dict) and "name" in x for x in base + patch)):
        out = copy.deepcopy(base)
        for item in patch:
            match = [i for i, b in enumerate(out) if b["name"] == item["name"]]
            if match:
                out[match[0]] = merge(out[match[0]], item)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def render(kdir):
    """our own kustomize build (resources, patches, images, labels) of kdir."""
    kpath = os.path.join(kdir, "kustomization.yaml")
    k = load_all(kpath)[0]
    docs = []
    for res in k.get("resources", []):
        p = os.path.join(kdir, res)
        if os.path.isdir(p):
            docs += render(p)
        elif os.path.isfile(p):
            docs += load_all(p)
        else:
            fail(kpath, f"resource {res} does not exist")
    for patch in k.get("patches", []):
        p = os.path.join(kdir, patch["path"])
        if not os.path.isfile(p):
            fail(kpath, f"patch {patch['path']} does not exist")
            continue
        for pd in load_all(p):
            hits = [i for i, d in enumerate(docs)
                    if d["kind"] == pd["kind"] and d["metadata"]["name"] == pd["metadata"]["name"]]
            if not hits:
                fail(p, f"patch target {pd['kind']}/{pd['metadata']['name']} not in the resources")
            for i in hits:
                docs[i] = merge(docs[i], pd)
    for img in k.get("images", []):
        for d in docs:
            for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                if c.get("image", "").split(":")[0] == img["name"]:
                    c["image"] = f"{img.get('newName', img['name'])}:{img.get('newTag', 'latest')}"
    for lab in k.get("labels", []):
        for d in docs:
            d.setdefault("metadata", {}).setdefault("labels", {}).update(lab["pairs"])
            if lab.get("includeSelectors") and d["kind"] == "Deployment":
                d["spec"]["selector"]["matchLabels"].update(lab["pairs"])
                d["spec"]["template"]["metadata"]["labels"].update(lab["pairs"])
    return docs


def container_ports(docs):
    return {p["name"] for d in docs if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}


def check_rendered(name, docs):
    ports = container_ports(docs)
    for d in docs:
        validate(name, d, ports)
    deps = [d for d in docs if d["kind"] == "Deployment"]
    if len(deps) != 1:
        fail(name, f"expected one Deployment, found {len(deps)}")
        return
    spec = deps[0]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        if "grpc" not in c.get(probe, {}):
            fail(name, f"{probe} is not a grpc (grpc.health.v1) probe")
    cm = next((d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "vqserve-config"), None)
    args = (cm or {}).get("data", {}).get("VQSERVE_ARGS", "").split()
    if "--drain-timeout" not in args:
        fail(name, "configmap VQSERVE_ARGS lacks --drain-timeout")
    else:
        drain = int(args[args.index("--drain-timeout") + 1])
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if not drain < grace <= drain + 30:
            fail(name, f"terminationGracePeriodSeconds {grace} does not match drain timeout {drain}")
    gpu = c.get("resources", {}).get("requests", {}).get("nvidia.com/gpu")
    if name.endswith("gpu") and gpu is None:
        fail(name, "gpu overlay does not request nvidia.com/gpu")
    if name.endswith("cpu") and gpu is not None:
        fail(name, "cpu overlay requests a gpu")
    if name.endswith("gpu") and (cm or {}).get("data", {}).get("VQSERVE_DEVICE") != "cuda":
        fail(name, "gpu overlay does not set VQSERVE_DEVICE=cuda")


def main():
    checked = 0
    # 1. every plain resource file directly (patches are partial and are checked once merged).
    patch_files = set()
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f == "kustomization.yaml":
                k = load_all(os.path.join(dirpath, f))[0]
                patch_files |= {os.path.normpath(os.path.join(dirpath, p["path"])) for p in k.get("patches", [])}
    for sub in ("base", "examples"):
        for f in sorted(os.listdir(os.path.join(ROOT, sub))):
            p = os.path.join(ROOT, sub, f)
            if f.endswith(".yaml") and f != "kustomization.yaml" and p not in patch_files:
                for d in load_all(p):
                    validate(os.path.relpath(p, ROOT), d, {"grpc", "metrics"})
                    checked += 1
    # 2. each overlay, rendered by our merge and by kubectl kustomize when available.
    kubectl = shutil.which("kubectl")
    for overlay in ("gpu", "cpu"):
        kdir = os.path.join(ROOT, "overlays", overlay)
        docs = render(kdir)
        check_rendered(f"overlays/{overlay}", docs)
        checked += len(docs)
        if kubectl:
            r = subprocess.run([kubectl, "kustomize", kdir], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                fail(f"kubectl kustomize overlays/{overlay}", r.stderr.strip())
            else:
                kdocs = [d for d in yaml.safe_load_all(r.stdout) if d]
                check_rendered(f"kubectl kustomize overlays/{overlay}", kdocs)
                checked += len(kdocs)
    for f in failures:
        print("FAIL", f)
    print(f"check_manifests: {checked} resources checked against kubernetes {K8S_VERSION} schemas"
          f"{' (+ kubectl kustomize)' if kubectl else ''}; {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
