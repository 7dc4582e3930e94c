#!/usr/bin/env bash
# Installs everything hostkit needs on a fresh Debian 12 machine: the Debian packages used by the
# tests and the build, the pinned Node 24 for both architectures, and the npm dependencies.
# Idempotent: every step is skipped when its result is already there. Run by `make setup`, which
# `make test`, `make run` and `make build` depend on.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=$(cat .node-version)
APT_PACKAGES=(iproute2 openssl tzdata qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross
  docker.io busybox-static chromium wrk nginx-light)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages (${missing[*]}); run as root or install them" >&2
    exit 1
  fi
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node 24 from the registry's per-architecture packages: x64 runs everything here, both are the
# base binaries of the single executables.
for arch in x64 arm64; do
  dir=.tools/node-$arch
  if [ "$(cat "$dir/VERSION" 2>/dev/null)" != "$NODE_VERSION" ]; then
    echo "setup: fetching node-linux-$arch@$NODE_VERSION"
    rm -rf "$dir" && mkdir -p "$dir"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null)
    tar -xzf "$tmp"/node-linux-"$arch"-*.tgz -C "$dir" --strip-components=1 package/bin/node
    rm -rf "$tmp"
    echo "$NODE_VERSION" > "$dir/VERSION"
  fi
done

export PATH="$PWD/.tools/node-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')/bin:$PATH"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies with node $(node --version)"
  npm ci --no-audit --no-fund --loglevel=error
fi
