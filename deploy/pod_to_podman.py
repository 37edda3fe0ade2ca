#!/usr/bin/env python3
"""renders a kustomize overlay of deploy/ and translates its vqserve Deployment's pod into the
`podman run` flags that reproduce it on one machine (scripts/image-test runs the image with them).

  pod_to_podman.py OVERLAY_DIR --models DIR --grpc-port P --metrics-port P --flags OUT [--json OUT]

rendering: `kubectl kustomize` (or `kustomize build`) when installed, else the strategic merge
of deploy/check_manifests.py. what is translated, and how:
  pod securityContext runAsUser/runAsGroup    --user UID:GID  (runAsNonRoot: UID must not be 0)
  pod securityContext fsGroup                 --group-add GID
  container allowPrivilegeEscalation: false   --security-opt no-new-privileges
  container readOnlyRootFilesystem: true      --read-only --read-only-tmpfs=false (only the
                                              declared volumes are writable, as in a pod)
  container capabilities drop/add             --cap-drop / --cap-add
  volumes: persistentVolumeClaim (models)     -v MODELS:mountPath[:ro]
  volumes: emptyDir                           --tmpfs mountPath
  envFrom configMapRef, env                   --env KEY=VALUE (the rendered ConfigMap's data)
  ports (containerPort)                       -p 127.0.0.1:HOSTPORT:containerPort
  resources.limits.memory                     --memory
  resources nvidia.com/gpu                    --device nvidia.com/gpu=all (CDI; gpu hosts only)
  terminationGracePeriodSeconds               --stop-timeout (and podman stop -t)
  command / args                              --entrypoint / the arguments after the image
the probes (grpc.health.v1 on a port) are returned in the json for the caller to exercise; the
image's HEALTHCHECK stands in for them inside podman.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def render(overlay):
    for tool in (["kubectl", "kustomize"], ["kustomize", "build"]):
        if shutil.which(tool[0]):
            r = subprocess.run(tool + [overlay], capture_output=True, text=True, timeout=120)
            if r.returncode == 0:
                return " ".join(tool), [d for d in yaml.safe_load_all(r.stdout) if d]
            print(f"pod_to_podman: {' '.join(tool)} failed: {r.stderr.strip()}", file=sys.stderr)
    try:
        import kubernetes_validate  # noqa: F401 (check_manifests imports it; render needs it not)
    except ImportError:
        import types
        sys.modules["kubernetes_validate"] = types.ModuleType("kubernetes_validate")
    import check_manifests  # our own strategic merge, the one check_manifests.py validates
    docs = check_manifests.render(overlay)
    if check_manifests.failures:
        raise SystemExit("pod_to_podman: " + "; ".join(check_manifests.failures))
    return "check_manifests.render (python)", docs


def k8s_memory_to_podman(q):
    units = {"Ki": "k", "Mi": "m", "Gi": "g", "Ti": "t"}
    for suffix, p in units.items():
        if q.endswith(suffix):
            return q[: -len(suffix)] + p
    return q  # plain bytes


def translate(docs, models, grpc_port, metrics_port):
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    cms = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    flags = []
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup"))
    if psc.get("runAsNonRoot") or csc.get("runAsNonRoot"):
        if uid in (None, 0):
            raise SystemExit("pod_to_podman: runAsNonRoot without a non-zero runAsUser")
    if uid is not None:
        flags += ["--user", f"{uid}:{gid if gid is not None else uid}"]
    if "fsGroup" in psc:
        flags += ["--group-add", str(psc["fsGroup"])]
    if csc.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    if csc.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    caps = csc.get("capabilities", {})
    for cap in caps.get("drop", []):
        flags += ["--cap-drop", cap]
    for cap in caps.get("add", []):
        flags += ["--cap-add", cap]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = []
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "persistentVolumeClaim" in v:
            ro = m.get("readOnly") or v["persistentVolumeClaim"].get("readOnly")
            flags += ["-v", f"{models}:{m['mountPath']}{':ro' if ro else ''}"]
            mounts.append({"path": m["mountPath"], "kind": "pvc", "readOnly": bool(ro)})
        elif "emptyDir" in v:
            flags += ["--tmpfs", f"{m['mountPath']}:rw,mode=1777"]
            mounts.append({"path": m["mountPath"], "kind": "emptyDir", "readOnly": False})
        else:
            raise SystemExit(f"pod_to_podman: volume {m['name']}: only pvc and emptyDir are translated")
    env = {}
    for ef in c.get("envFrom", []):
        env.update(cms[ef["configMapRef"]["name"]])
    for e in c.get("env", []):
        env[e["name"]] = e.get("value", "")
    for k in sorted(env):
        flags += ["--env", f"{k}={env[k]}"]
    host_ports = {}
    for p in c.get("ports", []):
        hp = {"grpc": grpc_port, "metrics": metrics_port}.get(p["name"])
        if hp is None:
            raise SystemExit(f"pod_to_podman: no host port for container port {p['name']}")
        flags += ["-p", f"127.0.0.1:{hp}:{p['containerPort']}"]
        host_ports[p["name"]] = {"container": p["containerPort"], "host": hp}
    res = c.get("resources", {})
    if "memory" in res.get("limits", {}):
        flags += ["--memory", k8s_memory_to_podman(res["limits"]["memory"])]
    gpu = res.get("limits", {}).get("nvidia.com/gpu") or res.get("requests", {}).get("nvidia.com/gpu")
    if gpu:
        flags += ["--device", "nvidia.com/gpu=all"]
    grace = pod.get("terminationGracePeriodSeconds", 30)
    flags += ["--stop-timeout", str(grace)]
    if c.get("command"):
        flags += ["--entrypoint", json.dumps(c["command"])]
    probes = {}
    for name in ("startupProbe", "livenessProbe", "readinessProbe"):
        if name in c:
            pr = c[name]
            probes[name] = {"grpc_port": pr.get("grpc", {}).get("port"),
                            "service": pr.get("grpc", {}).get("service", ""),
                            "periodSeconds": pr.get("periodSeconds", 10),
                            "failureThreshold": pr.get("failureThreshold", 3),
                            "timeoutSeconds": pr.get("timeoutSeconds", 1)}
    return {
        "image": c["image"],
        "uid": uid, "gid": gid, "fsGroup": psc.get("fsGroup"),
        "readOnlyRootFilesystem": bool(csc.get("readOnlyRootFilesystem")),
        "allowPrivilegeEscalation": csc.get("allowPrivilegeEscalation", True),
        "capabilities": caps, "mounts": mounts, "env": env, "ports": host_ports,
        "probes": probes, "terminationGracePeriodSeconds": grace,
        "args": c.get("args", []), "gpu": gpu, "flags": flags,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("overlay")
    ap.add_argument("--models", required=True)
    ap.add_argument("--grpc-port", type=int, required=True)
    ap.add_argument("--metrics-port", type=int, required=True)
    ap.add_argument("--flags", required=True, help="file: one podman run flag a line, then the args")
    ap.add_argument("--json")
    a = ap.parse_args()
    renderer, docs = render(a.overlay)
    out = translate(docs, os.path.abspath(a.models), a.grpc_port, a.metrics_port)
    out["renderer"] = renderer
    with open(a.flags, "w") as f:
        f.write("\n".join(out["flags"]) + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"pod_to_podman: {a.overlay} rendered by {renderer}: user {out['uid']}:{out['gid']}, "
          f"read-only root {out['readOnlyRootFilesystem']}, mounts "
          f"{[m['path'] + (':ro' if m['readOnly'] else '') for m in out['mounts']]}, ports "
          f"{ {k: v['container'] for k, v in out['ports'].items()} }, grace {out['terminationGracePeriodSeconds']} s, "
          f"args {out['args']}, VQSERVE_ARGS {out['env'].get('VQSERVE_ARGS')!r}")


if __name__ == "__main__":
    main()
