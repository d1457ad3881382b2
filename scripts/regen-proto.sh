#!/usr/bin/env bash
# Regenerates the Rust code of the RocketMQ 5.x gRPC API (crates/proxy/src/pb/apache.rocketmq.v2.rs)
# from crates/proxy/proto/apache/rocketmq/v2/*.proto. Uses tools/protogen (protox + tonic-prost-build,
# pure Rust: no protoc needed), a standalone crate outside the main workspace. Commit the output.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo run -j2 --quiet --manifest-path tools/protogen/Cargo.toml -- "$PWD"

# prost-build already pretty-prints; rustfmt makes the file match `cargo fmt` exactly.
if command -v rustfmt >/dev/null 2>&1; then
    rustfmt --edition 2021 crates/proxy/src/pb/apache.rocketmq.v2.rs
fi
