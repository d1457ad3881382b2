#!/usr/bin/env bash
# A short fuzzing pass over every cargo-fuzz target in fuzz/ (STYLE.md section 7, item 4).
#
# Installs cargo-fuzz if it is missing, builds all targets once, then for each target replays
# fuzz/regressions/<target>-*.bin and fuzzes for FUZZ_SECONDS starting from a scratch copy of
# the committed seed corpus (fuzz/target/smoke-corpus/<target>, git-ignored), so the
# repository is never modified. Prints one summary line per target and exits non-zero if any
# target crashed, timed out or failed a regression. Crash inputs land in
# fuzz/artifacts/<target>/ (git-ignored).
#
# Usage: scripts/fuzz-smoke.sh [target...]        (default: every target)
# Environment:
#   FUZZ_SECONDS     fuzzing time per target, default 10
#   FUZZ_RUNS        libFuzzer -runs cap per target, default -1 (no cap: time-bound);
#                    0 only replays the corpus
#   FUZZ_TIMEOUT     seconds one input may take before it counts as a hang, default 10
#   FUZZ_SANITIZER   cargo fuzz --sanitizer, default none (the code under test is safe Rust;
#                    `address` builds slower and runs about 10x slower)
#   CARGO_BUILD_JOBS default 2
#
# Regressions listed in fuzz/regressions/KNOWN_OPEN are known, unfixed bugs: they are replayed
# and reported but do not fail the run. Delete the line when the bug is fixed.
#
# Needs only stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags to stable rustc.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"

seconds="${FUZZ_SECONDS:-10}"
runs="${FUZZ_RUNS:--1}"
timeout="${FUZZ_TIMEOUT:-10}"
sanitizer="${FUZZ_SANITIZER:-none}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz not found; installing it"
    start=$SECONDS
    cargo install --locked cargo-fuzz
    echo "installed cargo-fuzz in $((SECONDS - start)) s"
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

start=$SECONDS
cargo fuzz build --sanitizer "$sanitizer"
echo "built the fuzz targets in $((SECONDS - start)) s"

known_open=()
if [ -f regressions/KNOWN_OPEN ]; then
    mapfile -t known_open < <(grep -v -e '^#' -e '^[[:space:]]*$' regressions/KNOWN_OPEN)
fi
is_known_open() {
    local name
    for name in "${known_open[@]+"${known_open[@]}"}"; do
        [ "$name" = "$1" ] && return 0
    done
    return 1
}

logs="$root/fuzz/target/smoke-logs"
mkdir -p "$logs"
summary=()
failed=0

for target in "${targets[@]}"; do
    if [ ! -d "corpus/$target" ]; then
        echo "no seed corpus in fuzz/corpus/$target" >&2
        exit 2
    fi

    # Replay every committed regression input of this target.
    regressions_ok=0
    regressions_open=0
    regressions_failed=()
    shopt -s nullglob
    for input in regressions/"$target"-*.bin; do
        name="$(basename "$input")"
        if cargo fuzz run --sanitizer "$sanitizer" "$target" "$input" -- -timeout="$timeout" \
            >"$logs/$name.log" 2>&1; then
            regressions_ok=$((regressions_ok + 1))
            if is_known_open "$name"; then
                echo "note: $name passes now; remove it from fuzz/regressions/KNOWN_OPEN"
            fi
        elif is_known_open "$name"; then
            regressions_open=$((regressions_open + 1))
        else
            regressions_failed+=("$name")
        fi
    done
    shopt -u nullglob

    # Fuzz from a scratch copy of the seeds, so new inputs never land in the repository.
    corpus="$root/fuzz/target/smoke-corpus/$target"
    rm -rf "$corpus"
    mkdir -p "$corpus"
    cp -R "corpus/$target/." "$corpus/"
    seeds=$(find "$corpus" -type f | wc -l)
    log="$logs/$target.log"
    started=$SECONDS
    if cargo fuzz run --sanitizer "$sanitizer" "$target" "$corpus" -- \
        -max_total_time="$seconds" -runs="$runs" -timeout="$timeout" -print_final_stats=1 \
        >"$log" 2>&1; then
        status=ok
    else
        status=CRASH
    fi
    elapsed=$((SECONDS - started))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || true)
    grown=$(find "$corpus" -type f | wc -l)

    line="$(printf '%-18s %-5s %10s runs in %3d s  cov %5s  corpus %3d -> %5d  regressions %d ok' \
        "$target" "$status" "${execs:-?}" "$elapsed" "${cov:-?}" "$seeds" "$grown" "$regressions_ok")"
    [ "$regressions_open" -gt 0 ] && line+=", $regressions_open known open"
    [ "${#regressions_failed[@]}" -gt 0 ] && line+=", FAILED: ${regressions_failed[*]}"
    summary+=("$line")

    if [ "$status" != ok ]; then
        failed=1
        echo "---- $target crashed; last lines of $log:" >&2
        grep -v '^\s*\(at \|[0-9]*: \)' "$log" | tail -n 30 | cut -c1-300 >&2
        echo "---- crash input(s) in fuzz/artifacts/$target/" >&2
    fi
    if [ "${#regressions_failed[@]}" -gt 0 ]; then
        failed=1
        for name in "${regressions_failed[@]}"; do
            echo "---- regression $name fails; last lines of $logs/$name.log:" >&2
            grep -v '^\s*\(at \|[0-9]*: \)' "$logs/$name.log" | tail -n 15 | cut -c1-300 >&2
        done
    fi
done

echo
echo "fuzz smoke summary (${seconds} s per target, sanitizer ${sanitizer}):"
printf '  %s\n' "${summary[@]}"
exit "$failed"
