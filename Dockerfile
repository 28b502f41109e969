# Multi-stage build: a release binary on distroless (glibc, CA certificates, no shell),
# running as the distroless `nonroot` user (65532), matching deploy/kubernetes.
#   docker build -t health-orchestrator .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin health-orchestrator \
 && install -D target/release/health-orchestrator /out/health-orchestrator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/health-orchestrator /usr/local/bin/health-orchestrator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/health-orchestrator"]
CMD ["run", "--config", "/etc/health-orchestrator/config.toml"]
