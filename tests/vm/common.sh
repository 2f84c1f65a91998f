#!/usr/bin/env bash
# common.sh - sourced by the VM suite's scripts (prepare.sh, vm.sh, run.sh):
# where the guest kernel cache lives, what a ready cache holds, and the host
# programs the suite needs. Nothing here installs anything: scripts/deps.sh
# does, once, before any suite starts.

vm_cache=${EMBGW_VM_CACHE:-$HOME/.cache/embgw-vm}
# the initramfs name carries the version of its init: a changed init gets a
# fresh image instead of a stale cached one
vm_initrd=$vm_cache/initrd-3.gz

# host programs: QEMU, the initramfs build (busybox-static, cpio, kmod), and
# what the guests run from the shared root (iproute2, perftest, dumpcap) or
# the host judges with (tshark)
vm_programs="qemu-system-x86_64 busybox cpio depmod modprobe flock ip rdma tc
	ibv_devices ib_write_bw dumpcap tshark"

# Prints the programs that are missing, one line; fails if any is.
vm_missing_programs() {
	local p missing=""
	for p in $vm_programs; do
		command -v "$p" >/dev/null 2>&1 || missing="$missing $p"
	done
	[ -z "$missing" ] || { echo "${missing# }"; return 1; }
}

# Succeeds when the cache holds an unpacked kernel and the initramfs.
vm_cache_ready() {
	[ -f "$vm_cache/kver" ] && [ -f "$vm_initrd" ] &&
		[ -f "$vm_cache/k/boot/vmlinuz-$(cat "$vm_cache/kver")" ]
}
