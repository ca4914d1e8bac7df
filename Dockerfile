# Build: the release binary, with the default rule base embedded.
# `--build-arg FEATURES=cuda` adds the GPU replay backend (the CUDA libraries are loaded at run
# time, so the build needs no CUDA toolkit); run such an image on a CUDA runtime base with
# `--build-arg RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04` (it has libnvrtc and libcublas).
ARG RUNTIME_IMAGE=debian:bookworm-slim
FROM rust:1.95-slim-bookworm AS build
ARG FEATURES=""
WORKDIR /src
COPY . .
RUN cargo build --release --locked ${FEATURES:+--features "$FEATURES"}

# Run: a slim image with the binary and the rules folder (to override the embedded ones).
FROM ${RUNTIME_IMAGE}
# CA certificates for S3 snapshot storage over HTTPS.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data faultline \
    && mkdir -p /data \
    && chown faultline /data
COPY --from=build /src/target/release/faultline /usr/local/bin/faultline
COPY rules /usr/share/faultline/rules
USER faultline
WORKDIR /data
# The SQLite knowledge base and the snapshots folder live here.
VOLUME ["/data"]
EXPOSE 8080
# Bound to 0.0.0.0, the default access mode (auto) asks a token for every read and write:
# create one with `docker exec <container> faultline token create --name NAME
# --database sqlite:///data/faultline.db`, or choose a mode with FAULTLINE_ACCESS
# (open, token-for-writes, private).
ENTRYPOINT ["faultline", "serve"]
CMD ["--bind", "0.0.0.0:8080", "--database", "sqlite:///data/faultline.db", "--rules", "/usr/share/faultline/rules"]
