# For users with Docker (kind/): builds kruise-manager and kruise-daemon.
#   docker build --target manager -t kruise-rs/kruise-manager:dev .
#   docker build --target daemon  -t kruise-rs/kruise-daemon:dev .
# Without Docker, hack/build-images.sh builds the same images.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p kruise-manager -p kruise-daemon --bins \
 && cp target/release/kruise-manager target/release/kruise-daemon /usr/local/bin/

FROM debian:bookworm-slim AS manager
COPY --from=build /usr/local/bin/kruise-manager /usr/local/bin/kruise-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kruise-manager"]

FROM debian:bookworm-slim AS daemon
COPY --from=build /usr/local/bin/kruise-daemon /usr/local/bin/kruise-daemon
ENTRYPOINT ["/usr/local/bin/kruise-daemon"]
