# Build: the release binary, with the default rule base embedded.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

# Run: a slim image with the binary and the rules folder (to override the embedded ones).
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data faultline \
    && mkdir -p /data \
    && chown faultline /data
COPY --from=build /src/target/release/faultline /usr/local/bin/faultline
COPY rules /usr/share/faultline/rules
USER faultline
WORKDIR /data
# The SQLite knowledge base lives here.
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["faultline", "serve"]
CMD ["--bind", "0.0.0.0:8080", "--database", "sqlite:///data/faultline.db", "--rules", "/usr/share/faultline/rules"]
