//! Helpers the process-level tests share (each test file is its own crate and includes this
//! module with `mod common;`).

pub mod admin;
pub mod cluster;
pub mod controller;
pub mod e2e;
pub mod grpc;
