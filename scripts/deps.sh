#!/usr/bin/env bash
# Installs the Debian packages meshrun builds and tests with, only those missing.
# Idempotent: with everything present it runs no apt-get at all.
set -euo pipefail

pkgs=(
	build-essential cmake pkg-config
	libcjson-dev libssh2-1-dev libcmocka-dev
	openssh-server openssh-client iproute2 iputils-ping procps psmisc
	nftables
	zsh dash util-linux
	libibverbs-dev
	openmpi-bin libopenmpi-dev
	graphviz
	man-db
	jq python3
	file llvm
	clang
)
# The macOS cross-build (scripts/macos-cross.sh) fetches its compiler with npm;
# any npm on the PATH will do (e.g. nodesource's nodejs, which conflicts with
# Debian's npm package).
command -v npm >/dev/null || pkgs+=(npm)
[ "$#" -gt 0 ] && pkgs+=("$@")

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

sudo=
[ "$(id -u)" -ne 0 ] && sudo=sudo
echo "[INFO] installing missing packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
