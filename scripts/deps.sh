#!/usr/bin/env bash
# Install what embgw needs to build and run every test suite on Debian 12,
# once, before any suite starts (scripts/test.sh runs this first); the
# suites themselves install nothing. clang is for the libFuzzer target, dpdk
# for the gateway and its integration tests (dpdk-telemetry.py included),
# iproute2 for the veth pairs that join the demo's and the tests' gateways,
# rdma-core for the verbs payload driver, tshark for the captures, Debian's
# NumPy, PyTorch and pytest (for /usr/bin/python3) for the embgw Python
# package, its tests and the engine integration cases; libmicrohttpd for
# the gateway's metrics endpoint, and Prometheus, Python's OpenMetrics
# parser and curl for the integration case that scrapes it; PyNaCl for the
# conformance peer's tags (SipHash-2-4, doc/protocol.md); libsystemd-dev
# for the gateway's sd_notify, systemd for systemd-analyze (the unit's
# checks; nothing is started), debhelper, dh-python, dpkg-dev, fakeroot
# and lintian for the Debian packages (scripts/package.sh, the packages
# case), groff-base for checking the man pages; clang-format, shellcheck,
# cppcheck and flake8 for devtools/check.sh (Debian 12 has no ruff);
# valgrind for the benchmark's instruction count (control-instr); QEMU,
# busybox-static, cpio and kmod for the RoCEv2 suite in tests/vm, whose
# guest kernel (Debian's kernel package, unpacked, not installed) is also
# prepared here, in its cache (tests/vm/prepare.sh). EMBGW_SKIP_VM=1 leaves
# the VM suite's part out (not under CI=true).
# Anything that cannot be installed or prepared is an error: the exit status
# is non-zero and the last line says what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(build-essential meson ninja-build pkg-config libcunit1-dev libsodium-dev
	libconfig-dev clang libclang-rt-14-dev valgrind dpdk dpdk-dev libdpdk-dev python3 procps
	libibverbs-dev rdma-core ibverbs-utils perftest tshark libzmq3-dev
	python3-numpy python3-torch python3-pytest python3-nacl iproute2
	libmicrohttpd-dev prometheus python3-prometheus-client curl
	libsystemd-dev systemd debhelper dh-python dpkg-dev fakeroot lintian
	groff-base clang-format shellcheck cppcheck flake8 git
	etcd-server etcd-client libcurl4-openssl-dev libjson-c-dev)
vm=1
[ "${EMBGW_SKIP_VM:-0}" = 1 ] && [ "${CI:-}" != true ] && vm=0
[ $vm = 0 ] || pkgs+=(qemu-system-x86 busybox-static cpio kmod)

fail() { echo "deps: FAILED - $*" >&2; exit 1; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# apt waits for another apt (another checkout's deps.sh, an unattended
# upgrade) instead of failing on its lock
apt=(env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
[ -z "$SUDO" ] || apt=("$SUDO" "${apt[@]}")

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
vm_prepared=1
if [ $vm = 1 ]; then
	. tests/vm/common.sh
	vm_cache_ready || vm_prepared=0
fi
[ ${#missing[@]} -gt 0 ] || [ $vm_prepared = 0 ] || exit 0

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "deps: apt-get update"
"${apt[@]}" update -qq >"$log" 2>&1 || { cat "$log" >&2; fail "apt-get update"; }
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	if ! "${apt[@]}" install -y -qq "${missing[@]}" >"$log" 2>&1; then
		tail -20 "$log" >&2
		fail "apt-get install ${missing[*]}"
	fi
fi
if [ $vm_prepared = 0 ]; then
	echo "deps: preparing the VM suite's guest kernel in $vm_cache"
	tests/vm/prepare.sh || fail "the guest kernel for tests/vm (tests/vm/prepare.sh)"
fi
echo "deps: ready"
