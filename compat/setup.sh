#!/usr/bin/env bash
# Prepares the third-party clients used by the compatibility tests (STYLE.md 7.8):
# the official Apache RocketMQ C++ client, as bundled (librocketmq.so) in the PyPI
# package `rocketmq` 0.4.4, and the official Rust 5.x client (crate `rocketmq` 5.0.0), built
# into the driver binary `rust5-compat` (compat/rust-client-5, a workspace of its own) under
# <repo>/target/compat-rust5, and the official 5.x Python client (PyPI rocketmq-python-client)
# in a venv of its own, and the official 5.x Node.js client (npm rocketmq-client-nodejs) under
# <repo>/target/compat-node5; and, for the dashboard's browser test, Debian's Chromium and the
# npm package playwright-core (crates/dashboard/browser-tests, from its lockfile).
# Idempotent: a second run only re-checks and prints the summary.
#
# Env:
#   FERROMQ_COMPAT_VENV  venv directory (default: <repo>/target/compat-venv)
#   FERROMQ_COMPAT_VENV5 venv of the 5.x Python client (default: <repo>/target/compat-venv5)
#   FERROMQ_COMPAT_NODE5 npm prefix of the 5.x Node.js client (default: <repo>/target/compat-node5)
#   PYTHON               interpreter used to create the venv (default: python3)
set -euo pipefail

ROCKETMQ_PY_VERSION="0.4.4"
ROCKETMQ_PY5_VERSION="5.1.2"
ROCKETMQ_NODE5_VERSION="1.0.8"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
venv="${FERROMQ_COMPAT_VENV:-${repo_root}/target/compat-venv}"
# The 5.x Python client installs a module named `rocketmq` too: it gets a venv of its own.
venv5="${FERROMQ_COMPAT_VENV5:-${repo_root}/target/compat-venv5}"
node5="${FERROMQ_COMPAT_NODE5:-${repo_root}/target/compat-node5}"
python="${PYTHON:-python3}"

log() { echo "compat/setup.sh: $*" >&2; }

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "missing system packages ($*) and apt-get is not available; install them manually"
        exit 1
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    if [ "${apt_updated}" -eq 0 ]; then
        ${sudo} apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive ${sudo} apt-get install -y -qq --no-install-recommends "$@" >&2
}

# 1. venv (Debian's system python needs python3-venv for ensurepip).
if [ ! -x "${venv}/bin/python" ]; then
    if ! "${python}" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        apt_install python3-venv
    fi
    log "creating venv ${venv}"
    rm -rf "${venv}"
    "${python}" -m venv "${venv}"
fi
vpy="${venv}/bin/python"

# 2. rocketmq==0.4.4 from PyPI (a manylinux1 x86_64 wheel; there is no other platform).
installed="$("${vpy}" -c 'import importlib.metadata as m; print(m.version("rocketmq"))' 2>/dev/null || true)"
if [ "${installed}" != "${ROCKETMQ_PY_VERSION}" ]; then
    log "installing rocketmq==${ROCKETMQ_PY_VERSION}"
    "${vpy}" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
        "rocketmq==${ROCKETMQ_PY_VERSION}" >&2
fi

# 3. Shared libraries the bundled librocketmq.so links against.
pkg_dir="$("${vpy}" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("rocketmq").origin))')"
so="${pkg_dir}/librocketmq.so"
if [ ! -f "${so}" ]; then
    log "librocketmq.so not found in ${pkg_dir}"
    exit 1
fi
missing_libs() { { ldd "${so}" 2>/dev/null || true; } | awk '/not found/ {print $1}'; }
missing="$(missing_libs)"
if [ -n "${missing}" ]; then
    pkgs=()
    for lib in ${missing}; do
        case "${lib}" in
            libstdc++.so.*) pkgs+=(libstdc++6) ;;
            libgcc_s.so.*) pkgs+=(libgcc-s1) ;;
            libz.so.*) pkgs+=(zlib1g) ;;
            libssl.so.*|libcrypto.so.*) pkgs+=(libssl3) ;;
            *) pkgs+=(libc6) ;;  # libc, libm, libdl, libpthread, librt
        esac
    done
    log "librocketmq.so needs: ${missing//$'\n'/ }; installing ${pkgs[*]}"
    apt_install $(printf '%s\n' "${pkgs[@]}" | sort -u)
    missing="$(missing_libs)"
    if [ -n "${missing}" ]; then
        log "still unresolved after apt-get: ${missing}"
        exit 1
    fi
fi

# 4. Smoke test: the ctypes wrapper loads the library and resolves its symbols.
"${vpy}" -c 'import rocketmq.client' || { log "import rocketmq.client failed"; exit 1; }

# 5. The Rust 5.x client driver (crates/cli/tests/rust5_client.rs runs it). Its dependency
#    tree (tonic 0.9, rustls 0.21, opentelemetry...) stays out of the main workspace; the
#    first build takes a few minutes, later ones are cargo's no-op check.
if ! command -v cargo >/dev/null 2>&1; then
    log "cargo is not on PATH; it is needed to build compat/rust-client-5"
    exit 1
fi
rust5_target="${repo_root}/target/compat-rust5"
rust5_bin="${rust5_target}/release/rust5-compat"
log "building compat/rust-client-5 (rocketmq 5.0.0) into ${rust5_target}"
CARGO_TARGET_DIR="${rust5_target}" cargo build --release -j2 --locked --quiet \
    --manifest-path "${repo_root}/compat/rust-client-5/Cargo.toml" >&2
if [ ! -x "${rust5_bin}" ]; then
    log "the build did not produce ${rust5_bin}"
    exit 1
fi

# 6. The official 5.x Python client (PyPI rocketmq-python-client, gRPC; grpcio wheels), for
#    crates/cli/tests/sdk5_clients.rs, in its own venv.
if [ ! -x "${venv5}/bin/python" ]; then
    log "creating venv ${venv5}"
    rm -rf "${venv5}"
    "${python}" -m venv "${venv5}"
fi
vpy5="${venv5}/bin/python"
installed5="$("${vpy5}" -c 'import importlib.metadata as m; print(m.version("rocketmq-python-client"))' 2>/dev/null || true)"
if [ "${installed5}" != "${ROCKETMQ_PY5_VERSION}" ]; then
    log "installing rocketmq-python-client==${ROCKETMQ_PY5_VERSION}"
    "${vpy5}" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
        "rocketmq-python-client==${ROCKETMQ_PY5_VERSION}" >&2
fi
"${vpy5}" -c 'from rocketmq import Producer, SimpleConsumer' || { log "import of the 5.x Python client failed"; exit 1; }

# 7. The official 5.x Node.js client (npm rocketmq-client-nodejs), for
#    crates/cli/tests/node5_client.rs, installed under its own prefix.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
fi
installed_node5="$(node -e "try{console.log(require('${node5}/node_modules/rocketmq-client-nodejs/package.json').version)}catch(e){}" 2>/dev/null || true)"
if [ "${installed_node5}" != "${ROCKETMQ_NODE5_VERSION}" ]; then
    log "installing rocketmq-client-nodejs@${ROCKETMQ_NODE5_VERSION} into ${node5}"
    mkdir -p "${node5}"
    npm install --prefix "${node5}" --no-audit --no-fund --loglevel=error \
        "rocketmq-client-nodejs@${ROCKETMQ_NODE5_VERSION}" >&2
fi
NODE_PATH="${node5}/node_modules" node -e "require('rocketmq-client-nodejs')" \
    || { log "the 5.x Node.js client does not load"; exit 1; }

# 8. The dashboard's browser test (crates/cli/tests/dashboard_browser.rs): headless Chromium
#    from Debian, driven by playwright-core (pinned in crates/dashboard/browser-tests).
chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "${chromium}" ]; then
    log "installing Debian's chromium for the dashboard's browser test"
    apt_install chromium
fi
"${chromium}" --version >/dev/null 2>&1 || { log "${chromium} does not run"; exit 1; }
browser_tests="${repo_root}/crates/dashboard/browser-tests"
if ! node -e "require('${browser_tests}/node_modules/playwright-core/package.json')" >/dev/null 2>&1; then
    log "installing playwright-core into ${browser_tests}/node_modules (npm ci)"
    npm ci --prefix "${browser_tests}" --no-audit --no-fund --loglevel=error >&2
fi

# 9. The controller partition test (crates/cli/tests/controller_partition.rs) builds a private
#    network of Linux network namespaces with iproute2's `ip` (it needs root, as CI has).
if ! command -v ip >/dev/null 2>&1; then
    log "installing iproute2 for the network-namespace partition test"
    apt_install iproute2
fi

echo "compat ready: venv=${venv} python=$("${vpy}" -c 'import sys; print(sys.version.split()[0])') rocketmq=${ROCKETMQ_PY_VERSION} lib=${so} rust5=${rust5_bin} venv5=${venv5} rocketmq-python-client=${ROCKETMQ_PY5_VERSION} node5=${node5} rocketmq-client-nodejs=${ROCKETMQ_NODE5_VERSION} chromium=${chromium}"
