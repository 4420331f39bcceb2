#!/usr/bin/env bash
# Builds the WebAssembly sysroot: libsodium and msgpack-c compiled with emcc
# from Debian's source packages, installed under
#   ${SIMFARM_CACHE:-~/.cache/simfarm}/wasm-sysroot-<emcc>-<sodium>-<msgpack>
# The directory name is keyed by the three versions, so a toolchain or library
# upgrade builds a fresh sysroot and an unchanged one is never rebuilt.
#
#   scripts/wasm-sysroot.sh            build when absent, print the path
#   scripts/wasm-sysroot.sh --check    exit 0 when present, print the path
#   scripts/wasm-sysroot.sh --path     print the path only
set -euo pipefail

die() { echo "wasm-sysroot: $*" >&2; exit 1; }

export NODE_PATH=/usr/share/nodejs
export NODE_OPTIONS=--no-experimental-fetch

version_of() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none
}

cache=${SIMFARM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/simfarm}
key="emcc$(version_of emscripten)-sodium$(version_of libsodium-dev)-msgpack$(version_of libmsgpack-dev)"
key=$(printf '%s' "$key" | tr -c 'A-Za-z0-9._+-' '_')
sysroot="$cache/wasm-sysroot-$key"

case "${1:-}" in
--path) echo "$sysroot"; exit 0 ;;
--check) [ -f "$sysroot/.complete" ] && { echo "$sysroot"; exit 0; }; exit 1 ;;
"") ;;
*) die "unknown option '$1' (expected --check or --path)" ;;
esac

if [ -f "$sysroot/.complete" ]; then
    echo "$sysroot"
    exit 0
fi

command -v emcc >/dev/null || die "emcc not found: run scripts/install-deps.sh"
command -v apt-get >/dev/null || die "apt-get not found: the sysroot is built from Debian source packages"

mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage="$work/sysroot"
mkdir -p "$stage"

echo "wasm-sysroot: building $sysroot (a few minutes, once)" >&2
log="$work/build.log"

fetch_source() {
    # apt-get source refuses to drop privileges into a directory the _apt user
    # cannot write; the download is verified either way.
    (cd "$work" && apt-get source -q --download-only "$1" >>"$log" 2>&1 &&
        dpkg-source -x --no-check "$(ls "$1"_*.dsc | head -n 1)" "$work/$1-src" >>"$log" 2>&1) ||
        { tail -n 30 "$log" >&2; die "apt-get source $1 failed (is there a deb-src entry? run scripts/install-deps.sh)"; }
}

build_sodium() {
    fetch_source libsodium
    (
        cd "$work/libsodium-src"
        autoreconf -fi
        emconfigure ./configure --prefix="$stage" --host=wasm32-unknown-emscripten \
            --disable-shared --enable-static --disable-asm --without-pthreads \
            --disable-ssp --enable-minimal=no CFLAGS="-O2"
        emmake make -j"$(nproc)"
        emmake make install
    ) >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "building libsodium failed (log above)"; }
}

build_msgpack() {
    fetch_source msgpack-c
    (
        mkdir -p "$work/msgpack-build"
        cd "$work/msgpack-build"
        emcmake cmake "$work/msgpack-c-src" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_INSTALL_PREFIX="$stage" -DBUILD_SHARED_LIBS=OFF \
            -DMSGPACK_ENABLE_SHARED=OFF -DMSGPACK_ENABLE_STATIC=ON \
            -DMSGPACK_BUILD_EXAMPLES=OFF -DMSGPACK_BUILD_TESTS=OFF
        emmake make -j"$(nproc)"
        emmake make install
    ) >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "building msgpack-c failed (log above)"; }
}

build_sodium
build_msgpack

[ -f "$stage/lib/libsodium.a" ] || die "libsodium.a missing after build"
ls "$stage"/lib/libmsgpack*.a >/dev/null 2>&1 || die "libmsgpack*.a missing after build"

date -u +%FT%TZ >"$stage/.complete"
rm -rf "$sysroot"
mv "$stage" "$sysroot"
echo "wasm-sysroot: ready at $sysroot" >&2
echo "$sysroot"
