#!/usr/bin/env python3
"""static checks of the Dockerfile (scripts/image-test builds and runs it with podman): debian
bookworm stages only, VQSERVE_DEVICE picks cpu or cuda (cuda: nvcc, cudart and cublas from
nvidia's pypi wheels), the build step is scripts/setup itself (so ci exercises it) with the cmake
switches it needs, files it copies exist, the runtime stage installs no compiler or -dev package,
runs non-root on 0.0.0.0 with a grpc health check, and its ports match the kubernetes manifests."""
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
    froms = [m.groups() for l in lines for m in [re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", l, re.I)] if m]
    stages = {name for _, name in froms if name}
    need(stages == {"build", "runtime"}, f"stages {sorted(stages)}, want build and runtime")
    for image, name in froms:
        need(image == "debian:bookworm" or image in stages, f"stage {name} is not FROM debian:bookworm ({image})")
    need(froms and froms[-1][1] == "runtime", "the last stage is not the runtime")
    need(any(re.match(r"ARG\s+VQSERVE_DEVICE=cpu\b", l) for l in lines), "no ARG VQSERVE_DEVICE=cpu")
    build = text[text.index("AS build"):text.index("AS runtime")] if "AS runtime" in text else ""
    runtime = text[text.index("AS runtime"):] if "AS runtime" in text else ""
    for wheel in ("nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-cublas"):
        need(re.search(wheel + r"==\d", build), f"the cuda builder does not pin the {wheel} wheel")
    need(re.search(r"cuda\)[^;]*cuda=ON", re.sub(r"\\\n", " ", build)), "VQSERVE_DEVICE=cuda does not build with -DVQSERVE_CUDA=ON")
    need(re.search(r"\*\)\s*cuda=OFF", re.sub(r"\\\n", " ", build)), "VQSERVE_DEVICE=cpu does not build with -DVQSERVE_CUDA=OFF")
    need(re.search(r"VQSERVE_CMAKE_ARGS=\"[^\"]*-DVQSERVE_CUDA=\$cuda", build), "the build does not pass VQSERVE_CMAKE_ARGS")
    need(any(l.startswith("RUN ") and "bash scripts/setup --no-model" in l for l in lines), "build does not run scripts/setup --no-model")
    cmake = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    for opt in re.findall(r"-D(VQSERVE_\w+)=", build):
        need(re.search(r"(option|set)\(" + opt + r"\b", cmake), f"the build sets {opt}, which CMakeLists.txt does not define")
    for bad in (r"\bbuild-essential\b", r"\bg\+\+", r"\bgcc\b", r"\bclang\b", r"\bcmake\b", r"\S+-dev\b"):
        need(not re.search(bad, runtime), f"the runtime stage installs {bad}")
    need(re.search(r"VQSERVE_HOST=0\.0\.0\.0", runtime), "the runtime does not set VQSERVE_HOST=0.0.0.0")
    entry = open(os.path.join(ROOT, "deploy/docker/entrypoint.sh")).read()
    need('--host "${VQSERVE_HOST' in entry, "entrypoint.sh does not pass --host $VQSERVE_HOST")
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
