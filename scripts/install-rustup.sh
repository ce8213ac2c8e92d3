#!/usr/bin/env bash
# Installs rustup into ~/.cargo/bin from static.rust-lang.org, checked against its published
# SHA-256; the arguments go to rustup-init (e.g. --default-toolchain none). Used by
# scripts/setup.sh (no usable cargo) and scripts/fuzz.sh (nightly for cargo-fuzz).
# rustup-init is fetched directly rather than through https://sh.rustup.rs: that script only
# downloads the same file, and its host does not resolve on machines whose network reaches
# static.rust-lang.org but little else (this project's CI). Needs curl and sha256sum.
set -euo pipefail

triple="$(uname -m)-unknown-linux-gnu"
url="https://static.rust-lang.org/rustup/dist/$triple/rustup-init"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsS --proto '=https' --tlsv1.2 --retry 3 -o "$tmp/rustup-init" "$url"
sum=$(curl -fsS --proto '=https' --tlsv1.2 --retry 3 "$url.sha256" | awk '{ print $1 }')
echo "$sum  $tmp/rustup-init" | sha256sum -c --quiet -
chmod +x "$tmp/rustup-init"
"$tmp/rustup-init" -y --quiet "$@"
