#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine: prepares the third-party client the
# compatibility tests drive (compat/setup.sh: a Python venv with the official RocketMQ C++
# client), then the whole cargo test suite (unit, property, loopback, crash tests), then a
# short fuzz pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash compat/setup.sh
# The tests' stores live in temp dirs on a disk shared with other work: its used ratio (over
# 90 % on a busy CI machine) would make every broker refuse puts as Java's would, though a
# test writes a few MiB. Ratios off; the per-put space reservation still refuses a put the
# disk has no room for, and tests/disk_full.rs checks the ratios on a disk of its own.
export FERROMQ_DISK_RATIO_CHECK=off
cargo test -j2 --workspace --all-targets
# Doc tests are not covered by --all-targets.
cargo test -j2 --workspace --doc
# A short fuzzing pass over every decoder (installs cargo-fuzz on first use).
FUZZ_SECONDS="${FUZZ_SECONDS:-10}" bash scripts/fuzz-smoke.sh
