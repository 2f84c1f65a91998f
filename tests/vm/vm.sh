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
# Exit status: the script's, 98 when QEMU cannot run here at all, 99 when
# the guest reported nothing.
# The kernel and initramfs are cached in $EMBGW_VM_CACHE (~/.cache/embgw-vm).
set -euo pipefail
name=$1 out=$2 script=$3
shift 3
cache=${EMBGW_VM_CACHE:-$HOME/.cache/embgw-vm}
mem=${EMBGW_VM_MEM:-1536}
tmo=${EMBGW_VM_TIMEOUT:-900}
mkdir -p "$cache" "$out"
out=$(cd "$out" && pwd)
rm -f "$out/$name.rc" "$out/$name.log"

have() { command -v "$1" >/dev/null 2>&1; }
if ! have qemu-system-x86_64 || ! have busybox || ! have cpio || ! have depmod; then
	apt-get update -qq >/dev/null 2>&1 || true
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-system-x86 \
		busybox-static cpio kmod >/dev/null 2>&1 || true
fi
have qemu-system-x86_64 || { echo "vm.sh: qemu-system-x86_64 unavailable" >&2; exit 98; }

# 1. Debian's kernel image, unpacked into the cache (not installed).
lock=$cache/.lock
exec 9>"$lock"
flock 9
if [ ! -f "$cache/kver" ]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	if [ -z "$pkg" ]; then
		apt-get update -qq >/dev/null 2>&1 || true
		pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	fi
	[ -n "$pkg" ] || { echo "vm.sh: no Debian kernel package found" >&2; exit 98; }
	(cd "$cache" && rm -f ./*.deb && apt-get download "$pkg" >/dev/null 2>&1) ||
		{ echo "vm.sh: cannot download $pkg" >&2; exit 98; }
	rm -rf "$cache/k"
	dpkg-deb -x "$cache/$pkg"_*.deb "$cache/k"
	rm -f "$cache"/*.deb
	kver=${pkg#linux-image-}
	depmod -b "$cache/k" "$kver"
	echo "$kver" > "$cache/kver"
fi
kver=$(cat "$cache/kver")
k=$cache/k

# 2. A small initramfs: busybox, the modules to mount the 9p root, an init
#    that builds an overlay root and hands over to the guest script.
if [ ! -f "$cache/initrd-2.gz" ]; then
	i=$cache/initrd
	rm -rf "$i"
	mkdir -p "$i"/{bin,dev,proc,sys,host,ovl,newroot,mods}
	cp "$(command -v busybox)" "$i/bin/"
	n=0
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe -d "$k" -S "$kver" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r f; do
		n=$((n + 1))
		cp "$f" "$i/mods/$(printf %02d $n)_$(basename "$f")"
	done
	cat > "$i/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
for m in /mods/*.ko*; do insmod "$m" 2>/dev/null; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /host
mount -t tmpfs tmpfs /ovl; mkdir -p /ovl/u /ovl/w
mount -t overlay overlay -o lowerdir=/host,upperdir=/ovl/u,workdir=/ovl/w /newroot
mkdir -p /newroot/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none outdir /newroot/out
name=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^egw_name=//p')
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh /out/.$name.boot
INIT
	chmod +x "$i/init"
	(cd "$i" && find . | cpio -o -H newc 2>/dev/null | gzip > "$cache/initrd-2.gz")
fi
flock -u 9

# 3. The guest's boot script: modules, soft-RoCE prerequisites, then SCRIPT.
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

timeout "$tmo" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$mem" \
	-nographic -no-reboot -kernel "$k/boot/vmlinuz-$kver" -initrd "$cache/initrd-2.gz" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$out",mount_tag=outdir,security_model=none,multidevs=remap \
	"$@" \
	-append "console=ttyS0 quiet loglevel=3 panic=-1 egw_name=$name" \
	> "$out/$name.qemu.log" 2>&1 || true
[ -f "$out/$name.rc" ] && exit "$(cat "$out/$name.rc")"
echo "vm.sh: guest $name reported no exit status (see $out/$name.qemu.log)" >&2
exit 99
