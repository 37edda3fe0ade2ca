#!/usr/bin/env python3
"""static checks of the Dockerfile (no docker engine here): both variants resolve to defined
stages, the build step is scripts/setup itself (so ci exercises it), files it copies exist, the
runtime runs non-root with a grpc health check, and its ports match the kubernetes manifests."""
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []


def need(cond, msg):
    if not cond:
        problems.append(msg)


def main():
    text = open(os.path.join(ROOT, "Dockerfile")).read()
    joined = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    stages = {m.group(1) for l in lines for m in [re.match(r"FROM\s+\S+\s+AS\s+(\S+)", l, re.I)] if m}
    for variant in ("gpu", "cpu"):
        need(f"build-{variant}" in stages and f"runtime-{variant}" in stages, f"no stages for VARIANT={variant}")
    need(any(re.match(r"FROM\s+nvidia/cuda:\S*-devel-\S+\s+AS\s+build-gpu", l) for l in lines), "gpu build stage is not a cuda devel image")
    need(any(re.match(r"FROM\s+nvidia/cuda:\S*-runtime-\S+\s+AS\s+runtime-gpu", l) for l in lines), "gpu runtime stage is not a cuda runtime image")
    need(any(l.startswith("RUN bash scripts/setup --no-model") for l in lines), "build does not run scripts/setup --no-model")
    setup = open(os.path.join(ROOT, "scripts/setup")).read()
    need("--no-model)" in setup, "scripts/setup does not accept --no-model")
    need("VQSERVE_CMAKE_ARGS" in setup, "scripts/setup ignores VQSERVE_CMAKE_ARGS")
    for l in lines:
        for path in re.findall(r"(?:^|\s)((?:deploy|scripts)/[\w./-]+)", l):
            need(os.path.exists(os.path.join(ROOT, path)), f"Dockerfile refers to missing {path}")
    user = [l for l in lines if l.startswith("USER ")]
    need(user and not user[-1].split()[1].startswith(("0", "root")), "runtime does not run as a non-root user")
    hc = [l for l in lines if l.startswith("HEALTHCHECK")]
    need(hc and re.search(r"vqctl --target \S+ .*health", hc[-1]), "HEALTHCHECK does not use vqctl health")
    need(not re.search(r"\.gguf\s*$", " ".join(l for l in lines if l.startswith(("COPY", "ADD")))), "a model is copied into the image")
    exposed = {p for l in lines if l.startswith("EXPOSE") for p in l.split()[1:]}
    cm = yaml.safe_load(open(os.path.join(ROOT, "deploy/base/configmap.yaml")))["data"]
    need({cm["VQSERVE_PORT"], cm["VQSERVE_METRICS_PORT"]} <= exposed, f"EXPOSE {exposed} does not match the configmap ports")
    r = subprocess.run(["sh", "-n", os.path.join(ROOT, "deploy/docker/entrypoint.sh")], capture_output=True, text=True)
    need(r.returncode == 0, f"entrypoint.sh: {r.stderr.strip()}")
    need(os.access(os.path.join(ROOT, "deploy/docker/entrypoint.sh"), os.X_OK), "entrypoint.sh is not executable")
    r = subprocess.run(["bash", "-n", os.path.join(ROOT, "scripts/setup")], capture_output=True, text=True)
    need(r.returncode == 0, f"scripts/setup: {r.stderr.strip()}")
    for p in problems:
        print("FAIL", p)
    print(f"check_dockerfile: stages {sorted(stages)}; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
