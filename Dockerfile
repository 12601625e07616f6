# sortd container image. Multi-stage: the build stage runs the project's own
# install script and CMake build; the runtime stage holds only the installed
# binaries and the packages of the shared libraries they load (no compilers).
#
# GPU image (default): built on NVIDIA's CUDA development image; the CUDA
# runtime is linked statically, so the runtime stage needs only the driver,
# which the NVIDIA container toolkit mounts at run time.
#   docker build -t sortd:gpu .
# CPU-only image: Debian 12 without CUDA.
#   docker build -t sortd:cpu --build-arg BASE_IMAGE=debian --build-arg BASE_TAG=12 \
#     --build-arg RUNTIME_IMAGE=debian --build-arg RUNTIME_TAG=12-slim .
# scripts/image-smoke.sh builds, starts and checks either; docs/deploy.md.
ARG BASE_IMAGE=nvidia/cuda
ARG BASE_TAG=13.0.0-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda
ARG RUNTIME_TAG=13.0.0-base-ubuntu24.04

FROM ${BASE_IMAGE}:${BASE_TAG} AS build
# GPU code for sm_90 (H100, H200) plus PTX that other GPUs JIT-compile.
ARG CUDA_ARCHITECTURES="90-real;90-virtual"
# The commit the image is built from (the build context leaves .git out).
ARG SORTD_GIT_COMMIT=unknown
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# Dependencies first: this layer is reused until the install script changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
RUN SORTD_GIT_COMMIT="${SORTD_GIT_COMMIT}" cmake -S . -B build -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSORTD_BUILD_TESTS=OFF -DSORTD_BUILD_BENCH=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
 && SORTD_GIT_COMMIT="${SORTD_GIT_COMMIT}" cmake --build build -j"$(nproc)" \
 && cmake --install build --prefix /opt/sortd --component runtime --strip \
 && bash scripts/runtime-packages.sh /opt/sortd/bin/sortd /opt/sortd/bin/sortctl \
      > /opt/sortd/runtime-packages.txt

FROM ${RUNTIME_IMAGE}:${RUNTIME_TAG} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /opt/sortd /opt/sortd
# The libraries' packages as the build stage found them; fail the build if a
# library is still missing. Then an unprivileged user to run as.
RUN apt-get update && apt-get install -y --no-install-recommends $(cat /opt/sortd/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* \
 && if ldd /opt/sortd/bin/sortd /opt/sortd/bin/sortctl | grep "not found"; then exit 1; fi \
 && groupadd --system --gid 10001 sortd \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin sortd
USER 10001:10001
# --listen and --metrics_listen come from these variables (abseil's
# --tryfromenv reads FLAGS_<name>); every other flag is passed as arguments:
#   docker run sortd:gpu --engine=gpu --max_batch_delay_us=200
ENV PATH=/opt/sortd/bin:$PATH \
    FLAGS_listen=0.0.0.0:50051 \
    FLAGS_metrics_listen=0.0.0.0:9464
EXPOSE 50051 9464
# gRPC health (grpc.health.v1) on the port FLAGS_listen names; NOT_SERVING
# (draining) and no answer are both unhealthy. Six misses in a row (a minute)
# mark the container unhealthy, which also covers a slow GPU start.
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
  CMD sortctl health --timeout=3s --target="127.0.0.1:${FLAGS_listen##*:}" || exit 1
# SIGTERM drains: health NOT_SERVING, new work refused, in-flight work
# finished (--drain_timeout, 30 s by default). Give `docker stop` longer:
#   docker stop --time 40 CONTAINER
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/sortd/bin/sortd", "--tryfromenv=listen,metrics_listen"]
CMD []
