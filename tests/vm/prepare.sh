#!/usr/bin/env bash
# prepare.sh - the VM suite's guest kernel and initramfs, in the cache
# ($EMBGW_VM_CACHE, ~/.cache/embgw-vm): Debian's kernel package (which has
# soft-RoCE, rdma_rxe) downloaded and unpacked - not installed - with its
# module index, and a small busybox initramfs that mounts the host's root.
# scripts/deps.sh runs this once, before any suite starts; it works under a
# lock, and each piece appears in the cache only when complete, so guests
# (which only read the cache) never see half of it. Nothing to do when the
# cache is ready. Needs the package lists (apt-get update) and busybox-static,
# cpio and kmod installed. Exit status: 0 ready, 1 with the reason.
set -euo pipefail
. "$(dirname "$0")/common.sh"
die() { echo "prepare.sh: $*" >&2; exit 1; }

mkdir -p "$vm_cache"
exec 9>"$vm_cache/.lock"
if ! flock -n 9; then
	echo "prepare.sh: waiting up to 600 s for another preparation of $vm_cache"
	flock -w 600 9 || die "$vm_cache stayed locked for 600 s"
fi
vm_cache_ready && exit 0
for p in busybox cpio depmod modprobe; do
	command -v "$p" >/dev/null 2>&1 || die "$p is missing (busybox-static, cpio, kmod)"
done

# 1. Debian's kernel image, unpacked into the cache
if [ ! -f "$vm_cache/kver" ]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	[ -n "$pkg" ] || die "no Debian kernel package behind linux-image-amd64 (package lists missing? apt-get update)"
	echo "prepare.sh: downloading and unpacking $pkg into $vm_cache"
	dl=$(mktemp -d "$vm_cache/dl.XXXXXX")
	# apt's download sandbox user cannot write a root-owned folder
	chmod 755 "$dl"
	if ! (cd "$dl" && apt-get download "$pkg") > "$dl/log" 2>&1; then
		cat "$dl/log" >&2
		rm -rf "$dl"
		die "cannot download $pkg"
	fi
	rm -rf "$vm_cache/k"
	dpkg-deb -x "$dl/$pkg"_*.deb "$dl/k"
	rm -rf "$dl"/*.deb
	kver=${pkg#linux-image-}
	depmod -b "$dl/k" "$kver"
	mv "$dl/k" "$vm_cache/k"
	rm -rf "$dl"
	echo "$kver" > "$vm_cache/kver.new"
	mv "$vm_cache/kver.new" "$vm_cache/kver"
fi
kver=$(cat "$vm_cache/kver")
k=$vm_cache/k

# 2. The initramfs: busybox, the modules to mount the 9p root, and an init
#    that either answers a probe (egw_probe=1: print a marker and power off,
#    proof that QEMU boots this kernel here) or builds an overlay root and
#    hands over to the guest's boot script written by vm.sh.
i=$(mktemp -d "$vm_cache/initrd.XXXXXX")
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
if grep -q egw_probe=1 /proc/cmdline; then
	echo EMBGW-VM-PROBE-OK
	echo o > /proc/sysrq-trigger; sleep 10
fi
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
(cd "$i" && find . | cpio -o -H newc 2>/dev/null | gzip > "$vm_initrd.new")
rm -rf "$i"
mv "$vm_initrd.new" "$vm_initrd"
vm_cache_ready || die "the cache in $vm_cache is still incomplete"
echo "prepare.sh: guest kernel $kver and initramfs ready in $vm_cache"
