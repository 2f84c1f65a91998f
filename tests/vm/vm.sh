#!/usr/bin/env bash
# vm.sh - boot a throw-away QEMU guest with Debian's stock kernel (which has
# soft-RoCE, rdma_rxe), the host's root filesystem shared read-only over 9p
# under a tmpfs overlay (same userland, same build tree), a shared output
# folder, and run a guest script in it. No KVM needed (TCG).
#
# usage: vm.sh NAME OUTDIR SCRIPT [qemu args...]
#   SCRIPT runs as root in the guest (sh), with the project's directory as
#   its working directory and OUTDIR mounted at /out (read-write, shared;
#   two guests given the same OUTDIR can coordinate through files there).
#   Its exit status lands in OUTDIR/NAME.rc, its output in OUTDIR/NAME.log.
#   When the guest's QEMU ends, vm.sh touches OUTDIR/NAME.exited.
# Exit status: the script's, 2 when a program or the guest kernel is missing
# (scripts/deps.sh installs and prepares them), 99 when the guest reported
# nothing.
# The kernel and initramfs are read from $EMBGW_VM_CACHE (~/.cache/embgw-vm),
# prepared by tests/vm/prepare.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
mem=${EMBGW_VM_MEM:-1536}
tmo=${EMBGW_VM_TIMEOUT:-900}

# Nothing is installed here: scripts/deps.sh installs the programs and
# prepares the cache once, before any guest boots.
if ! missing=$(vm_missing_programs); then
	echo "vm.sh: missing $missing - run scripts/deps.sh" >&2
	exit 2
fi
vm_cache_ready || { echo "vm.sh: no guest kernel in $vm_cache - run scripts/deps.sh" >&2; exit 2; }
kver=$(cat "$vm_cache/kver")
k=$vm_cache/k

boot() { # seconds, qemu args...
	local secs=$1
	shift
	timeout "$secs" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 \
		-nographic -no-reboot -kernel "$k/boot/vmlinuz-$kver" -initrd "$vm_initrd" "$@"
}

# usage: vm.sh --probe OUTDIR - can QEMU boot the guest kernel here at all?
# The initramfs prints a marker and powers off; exit 0 when the marker came
# within EMBGW_VM_PROBE_TIMEOUT seconds (180), else 77.
if [ "${1:-}" = --probe ] && [ $# -eq 2 ]; then
	out=$2 ptmo=${EMBGW_VM_PROBE_TIMEOUT:-180}
	mkdir -p "$out"
	t0=$(date +%s)
	boot "$ptmo" -m 512 -nic none \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 egw_probe=1" \
		> "$out/probe.qemu.log" 2>&1 || true
	if grep -q EMBGW-VM-PROBE-OK "$out/probe.qemu.log"; then
		echo "vm.sh: probe boot of kernel $kver: ok after $(( $(date +%s) - t0 )) s"
		exit 0
	fi
	echo "vm.sh: QEMU did not boot kernel $kver within $ptmo s (see $out/probe.qemu.log):" >&2
	tail -5 "$out/probe.qemu.log" >&2
	exit 77
fi

[ $# -ge 3 ] || { echo "usage: vm.sh NAME OUTDIR SCRIPT [qemu args...] | vm.sh --probe OUTDIR" >&2; exit 2; }
name=$1 out=$2 script=$3
shift 3
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/$name.rc" "$out/$name.log" "$out/$name.exited"

# The guest's boot script: modules, soft-RoCE prerequisites, then SCRIPT.
{
	echo '#!/bin/sh'
	# the overlay root is writable (tmpfs upper): /tmp stays as the host's,
	# so a project under /tmp is still visible; /run and /dev/shm start empty
	echo 'mount -t tmpfs tmpfs /run; mkdir -p /dev/shm; mount -t tmpfs tmpfs /dev/shm'
	echo "export EGW_KDIR='$k' EGW_KVER='$kver' PATH=/usr/sbin:/usr/bin:/sbin:/bin"
	echo "for m in virtio_net af_packet crc32_generic ib_core ib_uverbs rdma_rxe rdma_ucm sch_netem sch_prio cls_u32; do modprobe -d '$k' -S '$kver' \$m 2>/dev/null; done"
	echo 'ip link set lo up'
	printf 'cd %q\n' "$PWD"
	printf 'sh %q > /out/%s.log 2>&1; echo $? > /out/%s.rc\n' "$script" "$name" "$name"
	echo 'sync; echo o > /proc/sysrq-trigger; sleep 10'
} > "$out/.$name.boot"

boot "$tmo" -m "$mem" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$out",mount_tag=outdir,security_model=none,multidevs=remap \
	"$@" \
	-append "console=ttyS0 quiet loglevel=3 panic=-1 egw_name=$name" \
	> "$out/$name.qemu.log" 2>&1 || true
# a guest waiting on this one sees it gone at once instead of at its deadline
touch "$out/$name.exited"
[ -f "$out/$name.rc" ] && exit "$(cat "$out/$name.rc")"
echo "vm.sh: guest $name reported no exit status (see $out/$name.qemu.log)" >&2
exit 99
