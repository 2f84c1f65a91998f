#!/usr/bin/env bash
# Install what embgw needs to build and test on Debian 12, if missing.
# clang is for the libFuzzer target, dpdk for the gateway and its
# integration tests (dpdk-telemetry.py included), rdma-core for the verbs
# payload driver. tests/vm installs its own (qemu, busybox, tshark).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libcunit1-dev libsodium-dev
	libconfig-dev clang libclang-rt-14-dev dpdk dpdk-dev libdpdk-dev python3 procps
	libibverbs-dev rdma-core ibverbs-utils perftest tshark libzmq3-dev)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
