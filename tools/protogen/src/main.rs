//! Compiles `crates/proxy/proto/apache/rocketmq/v2/*.proto` with protox (pure Rust, no
//! `protoc`) and writes the tonic/prost code to `crates/proxy/src/pb/apache.rocketmq.v2.rs`.
//!
//! Usage: `cargo run --manifest-path tools/protogen/Cargo.toml [-- <repo root>]`
//! (the repo root defaults to two levels above this crate's manifest).

use std::path::PathBuf;

const FILES: [&str; 3] =
    ["apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto", "apache/rocketmq/v2/admin.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
    };
    let proto_dir = root.join("crates/proxy/proto");
    let out_dir = root.join("crates/proxy/src/pb");
    std::fs::create_dir_all(&out_dir)?;

    // google/protobuf/*.proto well-known types are built into protox.
    let fds = protox::compile(FILES, [&proto_dir])?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // The proxy crate builds tonic without the `channel` feature.
        .build_transport(false)
        // Buffers sized for RocketMQ's messages (crates/proxy/src/codec.rs).
        .codec_path("crate::codec::ProxyCodec")
        .out_dir(&out_dir)
        .compile_fds(fds)?;

    println!("wrote {}", out_dir.join("apache.rocketmq.v2.rs").display());
    Ok(())
}
