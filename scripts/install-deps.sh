#!/usr/bin/env bash
# Installs every Debian package simfarm needs to build, run and test, then
# builds the WebAssembly sysroot (libsodium and msgpack-c compiled with emcc
# from Debian's source packages). Idempotent: a second run changes nothing.
#
#   scripts/install-deps.sh            packages + npm + wasm sysroot
#   scripts/install-deps.sh --check    exit 0 when everything is present
#   scripts/install-deps.sh --runtime [--check]
#                                      only the libraries an installed
#                                      simfarm runs on (a node or coordinator
#                                      machine that does not build it)
#
# Runs apt-get as root, or through sudo when invoked as another user.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

PACKAGES=(
    build-essential pkg-config cmake autoconf automake libtool
    dpkg-dev
    libuv1-dev libmsgpack-dev libsodium-dev libwebsockets-dev libssl-dev
    libpq-dev postgresql postgresql-client
    ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
    emscripten node-acorn binaryen
    libcriterion-dev libcaf-dev g++
    chromium firefox-esr
    nodejs npm
    clang llvm libclang-rt-14-dev valgrind
    libfaketime
    python3-numpy python3-distributed
    libgtk-3-dev libayatana-appindicator3-dev
    xvfb xauth dbus-daemon libglib2.0-bin at-spi2-core
    python3-gi python3-dbusmock python3-pyatspi gir1.2-atspi-2.0 gir1.2-gtk-3.0
    slurm-wlm munge
)

# What build/bin/simfarm links, and build/bin/simfarm-desktop (GTK, the tray
# icon) besides (tests/integration/install.test.mjs checks simfarm's part of
# this list against the binary's NEEDED entries).
RUNTIME_PACKAGES=(
    libuv1 libmsgpackc2 libsodium23 libwebsockets17 libssl3 libpq5 ocl-icd-libopencl1
    libgtk-3-0 libayatana-appindicator3-1
)

die() { echo "install-deps: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

missing_packages() {
    local p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            echo "$p"
    done
}

# Node from another apt source may already provide nodejs and npm; accept
# whatever runs rather than fight over the package.
filter_node() {
    local p
    while read -r p; do
        case "$p" in
        nodejs) command -v node >/dev/null 2>&1 || echo "$p" ;;
        npm) command -v npm >/dev/null 2>&1 || echo "$p" ;;
        *) echo "$p" ;;
        esac
    done
}

have_deb_src() {
    grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/
}

add_deb_src() {
    have_deb_src && return 0
    echo "install-deps: adding a deb-src entry for Debian's source packages"
    as_root tee /etc/apt/sources.list.d/simfarm-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    need_update=1
}

install_packages() {
    local todo
    todo=$(missing_packages | filter_node)
    if [ -n "$todo" ] || [ "${need_update:-0}" = 1 ]; then
        echo "install-deps: apt-get install" $todo
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        [ -z "$todo" ] ||
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $todo
    fi
}

npm_install() {
    local dir
    for dir in "$top/web" "$top/tests/browser"; do
        [ -f "$dir/package-lock.json" ] || continue
        if [ ! -d "$dir/node_modules" ] ||
            [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
            echo "install-deps: npm ci in ${dir#"$top"/}"
            (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
        fi
    done
}

check=0 runtime=0
for arg in "$@"; do
    case "$arg" in
    --check) check=1 ;;
    --runtime) runtime=1 ;;
    *) die "unknown option '$arg' (--check, --runtime)" ;;
    esac
done

if [ "$runtime" = 1 ]; then
    PACKAGES=("${RUNTIME_PACKAGES[@]}")
    if [ "$check" = 1 ]; then
        [ -z "$(missing_packages)" ]
        exit
    fi
    need_update=0
    install_packages
    echo "install-deps: the runtime libraries are present"
    exit 0
fi

if [ "$check" = 1 ]; then
    [ -z "$(missing_packages | filter_node)" ] || exit 1
    "$here/wasm-sysroot.sh" --check >/dev/null || exit 1
    exit 0
fi

need_update=0
add_deb_src
install_packages
npm_install
"$here/wasm-sysroot.sh"
echo "install-deps: everything present"
