#!/usr/bin/env bash
# RoCEv2 end to end, for real: two QEMU guests (Debian's kernel, soft-RoCE)
# joined by a QEMU socket link - a two-host Ethernet segment. Guest "enc"
# runs an encode gateway, guest "lang" a language gateway; both drive DPDK
# (net_af_packet on eth0) for the control protocol and the verbs payload
# driver on rxe0 (bound to the same eth0) for RDMA WRITEs (the benchmark
# phase puts the control protocol on a second link, ctl0: below). The
# reference design's scenarios run byte-exact with resume; dumpcap in
# "lang" records the wire; then faults: with the encode gateway still
# running, a new language gateway fetches 40 rooms at a steady rate
# while (1) the encode guest drops
# its own RoCE packets for 8 s (netem behind a u32 filter on UDP port 4791,
# so the control protocol carries on): soft-RoCE retransmits and the rooms
# stall, then land; and (2) the encode QP goes to error after a set batch
# (--fault-qp-error: the fault-injecting driver writes under a key the
# language side never gave, whose NAK fails the QP; soft-RoCE does not
# give up on retries in a useful time, so the drop alone would not): the
# rooms in flight fail as payload errors, the driver rebuilds the
# QP with a new PSN and re-registers, the language side rebuilds its end,
# and the rooms opened after the last failure must land byte-exact. Then
# (3) per-window keys: a fresh encode gateway writes once more into the
# window of a room that has ended (--fault-stale-write): the language
# side's responder must refuse it - the NAK (remote access error) is
# looked for on the wire - the writer's QP recovers, and the rooms after
# it land byte-exact. mw_probe checks first that the guest's soft-RoCE
# enforces type-2 memory windows at all, and times one bind and one
# invalidation. Last, apart from those correctness phases, a benchmark
# phase: fresh gateways with a deployment's geometry (hidden 1024 bf16,
# the default 8,192-token pre-allocation, windows of MiBs, 4 rooms in
# flight, the control ports on a link of their own; EMBGW_VM_BENCH_HIDDEN,
# _ROOMS, _CONCURRENCY, _LENGTHS and _CTL change it), every byte verified,
# then ib_write_bw between the same two rxe
# devices at the gateway's own write size (its bytes over its writes),
# taking turns in EMBGW_VM_BENCH_ROUNDS rounds (2; 0 leaves the phase
# out, as scripts/test.sh does: tests prove behaviour): the line
# "bench vm-payload-rocev2". EMBGW_VM_BENCH_ONLY=1 boots the guests for
# the benchmark phase alone (scripts/bench.sh does, into build-vm-bench/).
#
# Last line: "vm: <rooms> rooms, <bytes> bytes verified over RoCEv2,
#             <packets> RDMA WRITE packets on the wire"
#
# usage: run.sh [EMBGW]  (the gateway binary; build/app/embgw/embgw)
# Nothing is installed here: scripts/deps.sh installs QEMU and the rest and
# prepares the guest kernel; anything missing fails the suite (exit 2) with
# a pointer to it. Before the guests, a probe boot checks that QEMU can boot
# the guest kernel at all; only where it verifiably cannot does the suite
# say so loudly and exit 77 (skipped), never 0.
# A guest is stopped after EMBGW_VM_TIMEOUT seconds (1800).
# Each guest waits at most EMBGW_VM_PEER_WAIT seconds (60) for the other to
# come up, and stops waiting at once when the other's QEMU has ended.
# EMBGW_VM_GUESTS="lang" (or "enc") boots one guest alone: the way to watch
# it give up on a peer that never started.
set -u
gw_arg=${1:-}
[ -z "$gw_arg" ] || gw_arg=$(realpath -m "$gw_arg")
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
. tests/vm/common.sh
out=${EMBGW_VM_OUT:-$root/build-vm}
judge_only=${EMBGW_VM_JUDGE_ONLY:-0} # 1: judge the last run's output again
bench_only=${EMBGW_VM_BENCH_ONLY:-0}  # 1: the benchmark phase alone
guests=${EMBGW_VM_GUESTS:-lang enc}
peer_wait=${EMBGW_VM_PEER_WAIT:-60}
# all phases, the benchmark's included, within one guest's life (vm.sh)
export EMBGW_VM_TIMEOUT=${EMBGW_VM_TIMEOUT:-1800}
embgw=$(realpath -m "${gw_arg:-build/app/embgw/embgw}")
# the guests run the built-in room source: embgw-gen, built beside it
gen=$(realpath -m "$(dirname "$embgw")/../embgw-gen/embgw-gen")
# built next to the gateway (tests/vm/meson.build)
mw_probe=$(realpath -m "$(dirname "$embgw")/../../tests/vm/mw_probe")
[ "$bench_only" = 1 ] || [ -x "$mw_probe" ] || { echo "vm: FAIL no $mw_probe (ninja -C build)"; exit 2; }
[ -x "$embgw" ] || { echo "vm: FAIL no gateway binary $embgw (meson setup build && ninja -C build)"; exit 2; }
[ -x "$gen" ] || { echo "vm: FAIL no $gen (ninja -C build)"; exit 2; }
# --fault-qp-error and --fault-stale-write are test-build options (the
# benchmark phase alone uses none: scripts/bench.sh runs it on any build)
[ "$bench_only" = 1 ] || "$gen" --help 2>&1 | grep -q "^test-build options" ||
	{ echo "vm: FAIL $gen is not a test build (meson -Dtest_hooks=true)"; exit 2; }
if ! missing=$(vm_missing_programs); then
	echo "vm: FAIL missing $missing - run scripts/deps.sh (it installs what the suites need)"
	exit 2
fi
vm_cache_ready || { echo "vm: FAIL no guest kernel in $vm_cache - run scripts/deps.sh"; exit 2; }
[ "$judge_only" = 1 ] || rm -rf "$out"
mkdir -p "$out"

port=$((20000 + $$ % 10000 * 2))
ctl_port=$((port + 1))
# phase 1 posts 124 batches (8 rooms, 8-block windows); the encode QP is
# put in error at the 30th batch of phase 2, with 10 rooms still to come
qp_error_at=154
MAC_ENC=52:54:00:88:00:01
MAC_LANG=52:54:00:88:00:02
# a second link between the guests (ctl0, 10.89.0.0/24) for the benchmark
# phase's control protocol: a net_af_packet port sees a copy of every frame
# of its interface, soft-RoCE's included, which a NIC's DPDK port never
# does (RoCE is steered to the RDMA engine); on a link of its own the
# control port costs the guests' CPU what it costs on a NIC, and RDMA
# keeps rxe0 on eth0 to itself, as ib_write_bw has it
MAC_ENC_CTL=52:54:00:89:00:01
MAC_LANG_CTL=52:54:00:89:00:02

# ---- the configurations the guests use ---------------------------------
head -c 48 /dev/urandom > "$out/psk.key"
common_pool='capacity_tokens = 131072; hidden_size = 32; dtype = "bf16";'
cat > "$out/encode.cfg" <<CFG
gateway = { name = "enc-vm"; roles = ["encode"]; key_file = "psk.key";
  pool = { $common_pool };
  timers = { rto_ms = 20; rto_max_ms = 500; round_ms = 20000; alloc_ms = 5000;
             heartbeat_ms = 200; peer_dead_ms = 10000; bootstrap_ms = 20000; };
};
ports = ( { name = "p0"; device = "net_af_packet0,iface=eth0";
  address = "10.88.0.1/24"; lcores = [1];
  payload = { driver = "verbs"; device = "rxe0"; port = 1; gid_index = "auto"; };
  neighbours = ( { address = "10.88.0.2"; mac = "$MAC_LANG"; } );
  peers = ( { name = "lang-vm"; address = "10.88.0.2"; } ); } );
CFG
cat > "$out/language.cfg" <<CFG
gateway = { name = "lang-vm"; roles = ["language"]; key_file = "psk.key";
  pool = { $common_pool policy = { kind = "fixed"; tokens = 1024; }; };
  limits = { max_blocks_per_round = 8; };
  timers = { rto_ms = 20; rto_max_ms = 500; round_ms = 20000; alloc_ms = 5000;
             heartbeat_ms = 200; peer_dead_ms = 10000; bootstrap_ms = 20000; };
};
ports = ( { name = "p0"; device = "net_af_packet0,iface=eth0";
  address = "10.88.0.2/24"; lcores = [1];
  payload = { driver = "verbs"; device = "rxe0"; port = 1; gid_index = "auto"; };
  neighbours = ( { address = "10.88.0.1"; mac = "$MAC_ENC"; } );
  peers = ( { name = "enc-vm"; address = "10.88.0.1"; } ); } );
CFG

# The benchmark phase's geometry: what a deployment moves, as far as the
# guests' memory (1.5 GiB each) and TCG's pace allow - hidden 1024, bf16
# (2 KiB a token, 256 KiB blocks), the default pre-allocation (fixed 8,192
# tokens, a 16 MiB first window), windows as large as what remains (no
# max_blocks_per_round), the default pipeline depth, several rooms in
# flight; pools of 98,304 tokens (192 MiB) on both sides. The link moves
# a few MB/s under TCG, so what one peer's QP has queued (up to rooms x
# pipeline depth x 16 MiB) takes tens of seconds to drain: the round
# deadline (no progress of a room) and the quarantine (a failed room's
# writes draining) are set for that, not for a NIC's microseconds; the
# bootstrap too, which the driver waits for the peer's registration (a
# guest pins 192 MiB for rxe slowly): the span measured starts with the
# first room, not with the wait.
bench_hidden=${EMBGW_VM_BENCH_HIDDEN:-1024}
bench_rooms=${EMBGW_VM_BENCH_ROOMS:-6}
bench_rounds=${EMBGW_VM_BENCH_ROUNDS:-2}
bench_conc=${EMBGW_VM_BENCH_CONCURRENCY:-4}
bench_lengths=${EMBGW_VM_BENCH_LENGTHS:-8192,4096,12288}
bench_gw="pool = { capacity_tokens = 98304; hidden_size = $bench_hidden; dtype = \"bf16\"; };
  timers = { rto_ms = 20; rto_max_ms = 500; round_ms = 180000; alloc_ms = 5000;
             quarantine_ms = 180000; heartbeat_ms = 200; peer_dead_ms = 10000;
             bootstrap_ms = 120000; };"
# The control port on ctl0, the payload on rxe0 (eth0): the GID is eth0's
# address's, its index (@GID@) filled in by the guest (gid.sh).
# EMBGW_VM_BENCH_CTL=eth0 puts the control ports back on the RoCE link, to
# measure what that costs.
case ${EMBGW_VM_BENCH_CTL:-ctl0} in
ctl0) ctl_if=ctl0 ctl_net=10.89.0 ctl_mac_enc=$MAC_ENC_CTL ctl_mac_lang=$MAC_LANG_CTL ;;
eth0) ctl_if=eth0 ctl_net=10.88.0 ctl_mac_enc=$MAC_ENC ctl_mac_lang=$MAC_LANG ;;
*) echo "vm: FAIL EMBGW_VM_BENCH_CTL is ctl0 or eth0, not ${EMBGW_VM_BENCH_CTL}"; exit 2 ;;
esac
cat > "$out/encode-bench.cfg" <<CFG
gateway = { name = "enc-vm"; roles = ["encode"]; key_file = "psk.key";
  $bench_gw
};
ports = ( { name = "p0"; device = "net_af_packet0,iface=$ctl_if";
  address = "$ctl_net.1/24"; lcores = [1];
  payload = { driver = "verbs"; device = "rxe0"; port = 1; gid_index = @GID@; };
  neighbours = ( { address = "$ctl_net.2"; mac = "$ctl_mac_lang"; } );
  peers = ( { name = "lang-vm"; address = "$ctl_net.2"; } ); } );
CFG
cat > "$out/language-bench.cfg" <<CFG
gateway = { name = "lang-vm"; roles = ["language"]; key_file = "psk.key";
  $bench_gw
};
ports = ( { name = "p0"; device = "net_af_packet0,iface=$ctl_if";
  address = "$ctl_net.2/24"; lcores = [1];
  payload = { driver = "verbs"; device = "rxe0"; port = 1; gid_index = @GID@; };
  neighbours = ( { address = "$ctl_net.1"; mac = "$ctl_mac_enc"; } );
  peers = ( { name = "enc-vm"; address = "$ctl_net.1"; } ); } );
CFG

# ---- what each guest runs -----------------------------------------------
# The RoCEv2 GID index of an address, read from sysfs (never hard-coded).
cat > "$out/gid.sh" <<'SH'
# sysfs shows GIDs as hex groups: ::ffff:10.88.0.1 is ...:ffff:0a58:0001
want=$(echo "$1" | awk -F. '{printf "ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}')
for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
	i=${f##*/}
	t=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)
	case "$(cat $f)" in *"$want") [ "$t" = "RoCE v2" ] && { echo $i; exit 0; };; esac
done
echo "no RoCEv2 GID for $1" >&2
exit 1
SH
cat > "$out/net.sh" <<'SH'
# the links found by their MACs (52:54:00:88:... the RoCE link, eth0;
# 52:54:00:89:... the benchmark's control link, ctl0), whatever order the
# kernel probed them in; ctl0 first, so that renaming the other to eth0
# never meets an eth0 that is the control link
for d in /sys/class/net/*; do
	case "$(cat $d/address)" in
	52:54:00:89:*) ip link set dev ${d##*/} name ctl0 ;;
	esac
done
for d in /sys/class/net/*; do
	case "$(cat $d/address)" in
	52:54:00:88:*) [ ${d##*/} = eth0 ] || ip link set dev ${d##*/} name eth0 ;;
	esac
done
# no address on ctl0: the gateways' ports answer for theirs, and the
# kernel is left no datagram of theirs to take through its own stack
ip link set ctl0 up
ip link set eth0 up
ip addr add $1/24 dev eth0
ip link set eth0 promisc on
rdma link add rxe0 type rxe netdev eth0
echo "waiting up to 5 s for rxe0"
for _ in $(seq 1 50); do [ -e /sys/class/infiniband/rxe0 ] && break; sleep 0.1; done
[ -e /sys/class/infiniband/rxe0 ] || echo "rxe0 did not appear within 5 s"
ibv_devices
SH
# wait_for FILE SECONDS WHAT: wait until /out/FILE exists, at most SECONDS,
# and not at all once the peer guest's QEMU has ended (/out/PEER.exited)
cat > "$out/wait.sh" <<'SH'
wait_for() {
	echo "waiting up to $2 s for $3 (/out/$1)"
	t0=$(date +%s)
	while [ ! -f "/out/$1" ]; do
		if [ -f "/out/$peer.exited" ]; then
			echo "gave up waiting for $3 after $(( $(date +%s) - t0 )) s: the $peer guest has stopped"
			return 1
		fi
		if [ $(( $(date +%s) - t0 )) -ge "$2" ]; then
			echo "gave up waiting for $3 after $2 s"
			return 1
		fi
		sleep 0.2
	done
	echo "$3 after $(( $(date +%s) - t0 )) s"
}
SH
cat > "$out/enc.sh" <<SH
set -x
peer=lang
. /out/wait.sh
sh /out/net.sh 10.88.0.1
touch /out/enc.up
wait_for lang.up $peer_wait "the language guest" || exit 1
if [ $bench_only != 1 ]; then
$gen -l 0,1 --no-huge -m 512 --file-prefix vm-enc -- \\
	-f /out/encode.cfg --produce --duration-ms 600000 \\
	--fault-qp-error $qp_error_at > /out/enc-gw.log 2>&1 &
gw=\$!
# the fault: once the language side's second phase runs, drop our RoCE
# packets (UDP to 4791) for a while - only those: the control protocol
# goes on, so rooms keep posting writes into the black hole
# (phase 1 ends within its 600 s --duration-ms)
if ! wait_for phase2.started 660 "the language side's second phase"; then
	kill -INT \$gw; wait \$gw
	exit 1
fi
sleep 5
tc qdisc add dev eth0 root handle 1: prio &&
tc qdisc add dev eth0 parent 1:3 handle 30: netem loss 100% &&
tc filter add dev eth0 parent 1:0 protocol ip u32 match ip dport 4791 0xffff flowid 1:3 &&
touch /out/fault.on
sleep 8
tc -s qdisc show dev eth0
tc qdisc del dev eth0 root && touch /out/fault.off
# the language guest says when its phases are over
# (phase 2 ends within its 300 s --duration-ms)
wait_for lang.done 360 "the language side's end"
done_rc=\$?
kill -INT \$gw; wait \$gw
echo "encode gateway: \$?"
[ \$done_rc -eq 0 ] || exit 1
# phase 3: a writer that writes into a window after its room ended
$gen -l 0,1 --no-huge -m 512 --file-prefix vm-enc3 -- \\
	-f /out/encode.cfg --produce --duration-ms 300000 \\
	--fault-stale-write 3 > /out/enc-gw3.log 2>&1 &
gw=\$!
touch /out/enc3.up
wait_for lang3.done 300 "the language side's third phase"
done_rc=\$?
kill -INT \$gw; wait \$gw
echo "encode gateway (phase 3): \$?"
[ \$done_rc -eq 0 ] || exit 1
fi
# the benchmark phase, in $bench_rounds rounds: each a fresh encode
# gateway producing the rooms the language side drives, then ib_write_bw
# at that gateway's own write size (its bytes over its writes), about
# 64 MiB, at least 10 writes - the gateway and the tool take turns, so a
# change in the host's load falls on both
gid=\$(sh /out/gid.sh 10.88.0.1)
[ -n "\$gid" ] || { echo "no RoCEv2 GID for 10.88.0.1: no benchmark"; exit 1; }
sed "s/@GID@/\$gid/" /out/encode-bench.cfg > /out/encode-bench.run.cfg
for r in \$(seq 1 $bench_rounds); do
	$gen -l 0,1 --no-huge -m 256 --file-prefix vm-encb\$r -- \\
		-f /out/encode-bench.run.cfg --produce --duration-ms 900000 > /out/enc-gwb\$r.log 2>&1 &
	gw=\$!
	touch /out/encb\$r.up
	wait_for langb\$r.done 900 "the language side's benchmark round \$r"
	done_rc=\$?
	kill -INT \$gw; wait \$gw
	echo "encode gateway (benchmark round \$r): \$?"
	[ \$done_rc -eq 0 ] || exit 1
	size=\$(sed -nE 's/^payload: .* writes=([0-9]+) bytes=([0-9]+) .*/\\2 \\1/p' /out/enc-gwb\$r.log |
		awk '\$2 > 0 { printf "%d", \$1 / \$2 }')
	[ -n "\$size" ] || size=65536
	iters=\$(( 67108864 / size ))
	[ \$iters -ge 10 ] || iters=10
	echo "\$size \$iters" > /out/ibbw\$r.size.new && mv /out/ibbw\$r.size.new /out/ibbw\$r.size
	# first 5 writes alone, for the wall clock: the measured run's wall
	# clock less this one's leaves the set-up out (process start, device,
	# connection), a check on perftest's own clock (the guest's TSC)
	for _ in \$(seq 1 40); do
		t0=\$(date +%s%N)
		ib_write_bw -d rxe0 -x \$gid -s \$size -n 5 -F --report_gbits 10.88.0.2 > /out/ibbw-short\$r.log 2>&1 && break
		sleep 0.5
	done
	echo "ibbw-wall-ns \$(( \$(date +%s%N) - t0 ))" >> /out/ibbw-short\$r.log
	# perftest's cycle-based clock sometimes reads 0 Gb/s under
	# emulation: up to 3 measurements, until one is non-zero; the wall
	# clock around each is logged beside it
	echo "ib_write_bw at \$size bytes x \$iters: up to 3 runs, each up to 40 tries to reach the server"
	for run in 1 2 3; do
		for _ in \$(seq 1 40); do
			t0=\$(date +%s%N)
			ib_write_bw -d rxe0 -x \$gid -s \$size -n \$iters -F --report_gbits 10.88.0.2 > /out/ibbw-client\$r.log 2>&1 && break
			sleep 0.5
		done
		echo "ibbw-wall-ns \$(( \$(date +%s%N) - t0 ))" >> /out/ibbw-client\$r.log
		awk -v s=\$size '\$1 == s { ok = \$4 > 0 } END { exit ok ? 0 : 1 }' /out/ibbw-client\$r.log && break
	done
	touch /out/ibbw\$r.done
	echo "ib_write_bw client (round \$r): \$?"
	# once more with every frame on eth0 also copied to a packet socket,
	# in both guests (dumpcap, no filter, into nothing): what a
	# net_af_packet control port on the RoCE link would cost
	dumpcap -i eth0 -w - > /dev/null 2> /run/tap\$r.log &
	tap=\$!
	for _ in \$(seq 1 300); do grep -q "Capturing on" /run/tap\$r.log && break; sleep 0.1; done
	for _ in \$(seq 1 40); do
		ib_write_bw -d rxe0 -x \$gid -s \$size -n \$iters -F --report_gbits 10.88.0.2 > /out/ibbw-tap\$r.log 2>&1 && break
		sleep 0.5
	done
	kill -INT \$tap; wait \$tap
	touch /out/ibbw-tap\$r.done
done
SH
cat > "$out/lang.sh" <<SH
set -x
peer=enc
. /out/wait.sh
sh /out/net.sh 10.88.0.2
touch /out/lang.up
wait_for enc.up $peer_wait "the encode guest" || exit 1
rc=0
if [ $bench_only != 1 ]; then
$mw_probe rxe0 \$(sh /out/gid.sh 10.88.0.2) > /out/mw_probe.log 2>&1
dumpcap -i eth0 -f udp -w /run/wire.pcapng > /run/dumpcap.log 2>&1 &
cap=\$!
echo "waiting up to 30 s for dumpcap to capture"
for _ in \$(seq 1 300); do grep -q "Capturing on" /run/dumpcap.log && break; sleep 0.1; done
grep -q "Capturing on" /run/dumpcap.log || echo "dumpcap did not say it captures after 30 s"
$gen -l 0,1 --no-huge -m 512 --file-prefix vm-lang -- \\
	-f /out/language.cfg --drive 8 --lengths 500,2000,10000,50000 \\
	--exit-when-done --duration-ms 600000 > /out/lang-gw.log 2>&1
rc=\$?
sleep 1
kill -INT \$cap; wait \$cap
cp /run/wire.pcapng /out/wire.pcapng
# phase 2: a steady stream of rooms across the encode side's fault
touch /out/phase2.started
$gen -l 0,1 --no-huge -m 512 --file-prefix vm-lang2 -- \
	-f /out/language.cfg --drive 40 --rate 2 --concurrency 4 --lengths 1000 \
	--exit-when-done --duration-ms 300000 > /out/lang-gw2.log 2>&1
touch /out/lang.done
# phase 3: one room at a time; the encode side writes into the window of
# its 3rd room once the 4th has ended (the 3rd was delivered before)
if wait_for enc3.up 60 "the encode gateway of phase 3"; then
	dumpcap -i eth0 -f udp -w /run/wire3.pcapng > /run/dumpcap3.log 2>&1 &
	cap=\$!
	for _ in \$(seq 1 300); do grep -q "Capturing on" /run/dumpcap3.log && break; sleep 0.1; done
	grep -q "Capturing on" /run/dumpcap3.log || echo "dumpcap did not say it captures after 30 s"
	$gen -l 0,1 --no-huge -m 512 --file-prefix vm-lang3 -- \
		-f /out/language.cfg --drive 12 --lengths 1000 \
		--exit-when-done --duration-ms 240000 > /out/lang-gw3.log 2>&1
	sleep 1
	kill -INT \$cap; wait \$cap
	cp /run/wire3.pcapng /out/wire3.pcapng
fi
touch /out/lang3.done
fi
# the benchmark phase: the realistic geometry, several rooms in flight,
# every byte verified (no capture: dumpcap would take the guest's CPU);
# each round's ib_write_bw server after its rooms
gid=\$(sh /out/gid.sh 10.88.0.2)
[ -n "\$gid" ] || { echo "no RoCEv2 GID for 10.88.0.2: no benchmark"; exit 1; }
sed "s/@GID@/\$gid/" /out/language-bench.cfg > /out/language-bench.run.cfg
for r in \$(seq 1 $bench_rounds); do
	wait_for encb\$r.up 120 "the encode gateway of benchmark round \$r" || break
	$gen -l 0,1 --no-huge -m 256 --file-prefix vm-langb\$r -- \
		-f /out/language-bench.run.cfg --drive $bench_rooms \
		--concurrency $bench_conc --lengths $bench_lengths \
		--exit-when-done --duration-ms 840000 > /out/lang-gwb\$r.log 2>&1
	touch /out/langb\$r.done
	wait_for ibbw\$r.size 120 "the gateway's write size (round \$r)" || break
	read size iters < /out/ibbw\$r.size
	timeout 300 ib_write_bw -d rxe0 -x \$gid -s \$size -n 5 -F --report_gbits > /out/ibbw-server-short\$r.log 2>&1
	for run in 1 2 3; do
		[ -f /out/enc.exited ] && { echo "no ib_write_bw server: the enc guest has stopped"; break; }
		timeout 300 ib_write_bw -d rxe0 -x \$gid -s \$size -n \$iters -F --report_gbits > /out/ibbw-server\$r.log 2>&1
		sleep 2
		[ -f /out/ibbw\$r.done ] && break
	done
	dumpcap -i eth0 -w - > /dev/null 2> /run/tap\$r.log &
	tap=\$!
	for _ in \$(seq 1 300); do grep -q "Capturing on" /run/tap\$r.log && break; sleep 0.1; done
	for run in 1 2 3; do
		[ -f /out/enc.exited ] && break
		timeout 300 ib_write_bw -d rxe0 -x \$gid -s \$size -n \$iters -F --report_gbits > /out/ibbw-server-tap\$r.log 2>&1
		sleep 2
		[ -f /out/ibbw-tap\$r.done ] && break
	done
	kill -INT \$tap; wait \$tap
done
echo "language gateway: \$rc"
exit \$rc
SH

# ---- boot both guests ---------------------------------------------------
if [ "$judge_only" = 1 ]; then
	enc_rc=$(cat "$out/enc.rc" 2>/dev/null || echo 99)
	lang_rc=$(cat "$out/lang.rc" 2>/dev/null || echo 99)
else
# QEMU is installed: can it boot the guest kernel here at all?
tests/vm/vm.sh --probe "$out"
case $? in
0) ;;
77) echo "vm: SKIPPED - QEMU cannot boot a guest on this machine; RoCEv2 was NOT tested"
    exit 77 ;;
*) echo "vm: FAIL the probe boot could not start"; exit 1 ;;
esac
enc_rc=99 lang_rc=99
lang_pid=
if [[ " $guests " == *" lang "* ]]; then
	EMBGW_VM_MEM=${EMBGW_VM_MEM:-1536} tests/vm/vm.sh lang "$out" /out/lang.sh -nic none \
		-netdev socket,id=n1,listen=127.0.0.1:$port \
		-device virtio-net-pci,netdev=n1,mac=$MAC_LANG \
		-netdev socket,id=n2,listen=127.0.0.1:$ctl_port \
		-device virtio-net-pci,netdev=n2,mac=$MAC_LANG_CTL &
	lang_pid=$!
	sleep 2
fi
if [[ " $guests " == *" enc "* ]]; then
	# the link's other end listens in the language guest's QEMU
	netdev=connect=127.0.0.1:$port ctl=connect=127.0.0.1:$ctl_port
	[ -n "$lang_pid" ] || netdev=listen=127.0.0.1:$port ctl=listen=127.0.0.1:$ctl_port
	tests/vm/vm.sh enc "$out" /out/enc.sh -nic none \
		-netdev socket,id=n1,$netdev \
		-device virtio-net-pci,netdev=n1,mac=$MAC_ENC \
		-netdev socket,id=n2,$ctl \
		-device virtio-net-pci,netdev=n2,mac=$MAC_ENC_CTL
	enc_rc=$?
fi
if [ -n "$lang_pid" ]; then
	wait $lang_pid
	lang_rc=$?
fi
fi
if [ "$enc_rc" -eq 2 ] || [ "$lang_rc" -eq 2 ]; then
	echo "vm: FAIL a guest could not start (enc $enc_rc, lang $lang_rc) - run scripts/deps.sh"
	exit 1
fi
gave_up=0
for g in lang enc; do
	grep -h "^gave up waiting" "$out/$g.log" 2>/dev/null | sed "s/^/vm: $g guest: /" | grep . && gave_up=1
done
if [ $gave_up = 1 ]; then
	echo "vm: FAIL a guest gave up waiting for its peer (enc $enc_rc, lang $lang_rc; logs in $out)"
	exit 1
fi

# ---- judge ----------------------------------------------------------------
fail=0
# key=value report lines (doc/gateway.md): kv LOG SECTION KEY
kv() { grep -E "^$2: port=p0 " "$1" 2>/dev/null | tail -1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }

# the benchmark phase: every byte of its rooms verified and nothing
# leaked (that much is asserted); its throughput against ib_write_bw at
# the gateway's own write size is a figure, not an assertion. Each round
# gives its gateway's bytes and seconds (the language side's span, first
# room opened to last verified) and ib_write_bw's figure right after it;
# the line sums the gateway's bytes and seconds over the rounds, and the
# tool's bytes and seconds likewise (rounds where both have a figure).
bench_rows=""
bok=0
for r in $(seq 1 "$bench_rounds"); do
	lg=$out/lang-gwb$r.log eg=$out/enc-gwb$r.log ib=$out/ibbw-client$r.log
	resb=$(grep -E "^result: port=p0 " "$lg" 2>/dev/null | tail -1)
	if [ -z "$resb" ] || ! grep -q " errors=0 leaked=0" <<<"$resb" ||
	   ! grep -q "result-encode: .* leaked=0" "$eg" 2>/dev/null; then
		echo "vm: FAIL benchmark round $r: ${resb:-no result}"
		tail -20 "$lg" "$eg" 2>/dev/null
		fail=1
		continue
	fi
	bok=$((bok + $(kv "$lg" language ok)))
	pw=$(grep -E "^payload: port=p0 " "$eg" | tail -1)
	wsize=$(sed -nE 's/.* writes=([0-9]+) bytes=([0-9]+) .*/\2 \1/p' <<<"$pw" |
		awk '$2 > 0 { printf "%d", $1 / $2 }')
	row="$r $(kv "$lg" language bytes) $(kv "$lg" latency secs) ${wsize:-0}"
	row+=" $(awk -v s="${wsize:-x}" '$1 == s { g = $4 } END { print g + 0 }' "$ib" 2>/dev/null)"
	row+=" $(sed -n 's/^ibbw-wall-ns //p' "$ib" 2>/dev/null | tail -1)"
	row+=" $(awk -v s="${wsize:-x}" '$1 == s { n = $2 } END { print n + 0 }' "$ib" 2>/dev/null)"
	row+=" $(kv "$lg" windows bound) $(kv "$lg" language rounds)"
	row+=" $(sed -nE 's/.* writes=([0-9]+) .*/\1/p' <<<"$pw") $(kv "$lg" windows bind_us)"
	row+=" $(kv "$lg" latency p50_ms)"
	row+=" $(sed -n 's/^ibbw-wall-ns //p' "$out/ibbw-short$r.log" 2>/dev/null | tail -1)"
	row+=" $(awk -v s="${wsize:-x}" '$1 == s { g = $4 } END { print g + 0 }' "$out/ibbw-tap$r.log" 2>/dev/null)"
	bench_rows+="$row"$'\n'
done
# per round: gateway MB/s, ib_write_bw (perftest's clock and the wall
# clock around it, set-up included), windows, resume rounds, writes
awk '$2 > 0 && $3 > 0 {
	printf "bench vm-payload-round: %d: gateway %.2f MB/s (%d bytes in %.1f s, room p50 %.1f s), ib_write_bw %.2f MB/s (%d x %d bytes; by the wall clock less a 5-write run'"'"'s %s MB/s; with packet sockets on eth0 %.2f MB/s); %d windows, %d resume rounds, %d writes, bind %.1f ms\n",
		$1, $2 / $3 / 1e6, $2, $3, $12 / 1000, $5 * 125, $7, $4,
		($6 > $13 && $13 > 0 && $7 > 5 ? sprintf("%.2f", $4 * ($7 - 5) / (($6 - $13) / 1e9) / 1e6) : "n/a"),
		$14 * 125, $8, $9, $10, $11 / 1000 }' <<<"$bench_rows"
awk -v c="$bench_conc" -v h="$bench_hidden" -v l="$bench_lengths" -v n="$bok" '
	$2 > 0 && $3 > 0 && $5 > 0 { b += $2; t += $3; w = $4; inv += 1 / $5; k++ }
	END {
		if (k == 0) { print "bench vm-payload-rocev2: not measured (no round with both figures)"; exit }
		# the tool moves the same bytes each round: its rounds
		# combine as the gateway'"'"'s do, bytes over time (harmonic)
		g = b / t / 1e6; i = k / inv
		printf "bench vm-payload-rocev2: %.2f MB/s (ratio %.2f vs ib_write_bw %.6f Gb/s = %.2f MB/s at the gateway'"'"'s write size, %d bytes; %d rooms in flight, %d rooms of %s tokens, hidden %d bf16, same rxe pair)\n",
			g, g * 8 / 1000 / i, i, i * 125, w, c, n, l, h }' <<<"$bench_rows"
for r in $(seq 1 "$bench_rounds"); do
	cyc=$(kv "$out/enc-gwb$r.log" payload cycles_per_block)
	[ -n "$cyc" ] && echo "bench vm-driver-cycles: $cyc cycles per block (round $r, encode side, post + completion)"
done
if [ "$bench_only" = 1 ]; then
	echo "vm: benchmark phase only: $bok rooms verified over RoCEv2 in $bench_rounds round(s)"
	exit $fail
fi

res=$(grep -E "^result: port=p0 " "$out/lang-gw.log" | tail -1)
val() { tr ' ' '\n' <<<"$res" | sed -n "s/^$1=//p"; }
rooms=$(val rooms); bytes=$(val bytes); errors=$(val errors); leaked=$(val leaked)
if [ "$lang_rc" -ne 0 ] || [ -z "$res" ] || [ "${errors:-1}" != 0 ] || [ "${leaked:-1}" != 0 ]; then
	echo "vm: FAIL language gateway (rc $lang_rc): ${res:-no result}"
	tail -20 "$out/lang-gw.log" "$out/lang.log" 2>/dev/null
	fail=1
fi
grep -q "result-encode: .* leaked=0" "$out/enc-gw.log" ||
	{ echo "vm: FAIL encode gateway"; tail -20 "$out/enc-gw.log" "$out/enc.log"; fail=1; }

# the fault phase: the QP failed and was rebuilt, rooms in the fault failed
# as payload errors only, and rooms opened after the last failure landed
resets=$(kv "$out/enc-gw.log" payload qp_resets)
res2=$(grep -E "^result: port=p0 " "$out/lang-gw2.log" 2>/dev/null | tail -1)
rec=$(kv "$out/lang-gw2.log" recovery after_last_failed_ok)
other=$(grep -E "^failed: port=p0 " "$out/lang-gw2.log" 2>/dev/null | grep -vc " reason=transport ")
bad2=$(kv "$out/lang-gw2.log" language bad)
unfin=$(kv "$out/lang-gw2.log" language unfinished)
if [ -f "$out/fault.on" ] && [ -f "$out/fault.off" ] && [ "${resets:-0}" -ge 1 ] &&
   [ "${rec:-0}" -ge 1 ] && [ "${other:-1}" -eq 0 ] && [ "${bad2:-1}" -eq 0 ] &&
   [ "${unfin:-1}" -eq 0 ] && grep -q "leaked=0" <<<"$res2"; then
	echo "fault: RoCE dropped for 8 s ($(sed -nE 's/.*dropped ([0-9]+),.*/\1/p' "$out/enc.log" | tail -1) packets) and survived; QP error injected: $resets QP reset(s), $(grep -E '^failed: port=p0 ' "$out/lang-gw2.log" | sed 's/^failed: port=p0 //' | tr '\n' ' ')- $rec rooms opened after the last failure landed byte-exact, nothing leaked"
else
	echo "vm: FAIL fault phase: resets=${resets:-?} recovered=${rec:-?} other-failures=${other:-?} bad=${bad2:-?} unfinished=${unfin:-?} ${res2:-no result}"
	tail -25 "$out/lang-gw2.log" "$out/enc-gw.log" 2>/dev/null
	fail=1
fi

# per-window keys: soft-RoCE enforces type-2 memory windows (mw_probe), and
# a write into the window of a room that had ended was refused by the
# responder - a NAK with a remote access error on the wire - the writer's
# QP recovered and the rooms after it landed byte-exact
grep -h "^mw_probe: " "$out/mw_probe.log" 2>/dev/null
grep -q "^mw_probe: type2 ok" "$out/mw_probe.log" 2>/dev/null ||
	{ echo "vm: FAIL soft-RoCE does not enforce type-2 memory windows (mw_probe)"; fail=1; }
nak=0
[ -f "$out/wire3.pcapng" ] &&
	nak=$(tshark -r "$out/wire3.pcapng" -Y "infiniband.aeth.syndrome.opcode == 3 &&
		infiniband.aeth.syndrome.error_code == 2" 2>/dev/null | wc -l)
res3=$(grep -E "^result: port=p0 " "$out/lang-gw3.log" 2>/dev/null | tail -1)
rec3=$(kv "$out/lang-gw3.log" recovery after_last_failed_ok)
# no room in flight when the refused write reset the QP: no room failed,
# no recovery line - then every room of the phase must have landed
[ -n "$rec3" ] || ! grep -q "^failed: port=p0 " "$out/lang-gw3.log" 2>/dev/null ||
	rec3=0
[ -n "$rec3" ] || rec3=$(kv "$out/lang-gw3.log" language ok)
other3=$(grep -E "^failed: port=p0 " "$out/lang-gw3.log" 2>/dev/null | grep -vc " reason=transport ")
bad3=$(kv "$out/lang-gw3.log" language bad)
unfin3=$(kv "$out/lang-gw3.log" language unfinished)
resets3=$(kv "$out/enc-gw3.log" payload qp_resets)
# the language side gave its windows and closed every one of them again
win3=$(kv "$out/lang-gw3.log" windows bound)
win3_closed=$(kv "$out/lang-gw3.log" windows closed)
if [ "$nak" -ge 1 ] && grep -q "test fault: .* written once more" "$out/enc-gw3.log" &&
   grep -q "remote access error" "$out/enc-gw3.log" && [ "${resets3:-0}" -ge 1 ] &&
   [ "${rec3:-0}" -ge 1 ] && [ "${other3:-1}" -eq 0 ] && [ "${bad3:-1}" -eq 0 ] &&
   [ "${unfin3:-1}" -eq 0 ] && grep -q "leaked=0" <<<"$res3" &&
   [ "${win3:-0}" -ge 1 ] && [ "${win3_closed:-x}" = "$win3" ]; then
	echo "windows: a write into an ended room's window was refused ($nak remote access error NAK(s) on the wire), $resets3 QP reset(s), $(grep -E '^failed: port=p0 ' "$out/lang-gw3.log" | sed 's/^failed: port=p0 //' | tr '\n' ' ')- $rec3 rooms opened after it landed byte-exact, nothing leaked, $win3 windows given and closed"
else
	echo "vm: FAIL window keys: naks=$nak resets=${resets3:-?} recovered=${rec3:-?} other-failures=${other3:-?} bad=${bad3:-?} unfinished=${unfin3:-?} windows=${win3:-?} closed=${win3_closed:-?} ${res3:-no result}"
	tail -25 "$out/lang-gw3.log" "$out/enc-gw3.log" 2>/dev/null
	fail=1
fi

# the wire: RDMA WRITE First(6)/Middle(7)/Last(8)/Only(10) packets, and the
# bytes their RETH announce must account for every byte transferred
pk=0 dma=0 ctl_other=0
if [ -f "$out/wire.pcapng" ]; then
	tshark -r "$out/wire.pcapng" -Y "infiniband.bth.opcode == 6 || infiniband.bth.opcode == 7 ||
		infiniband.bth.opcode == 8 || infiniband.bth.opcode == 10" \
		-T fields -e infiniband.bth.opcode -e infiniband.bth.destqp \
		-e infiniband.bth.psn -e infiniband.reth.dmalen > "$out/writes.txt" 2>/dev/null
	# soft-RoCE retransmits under emulation: a packet is (QP, PSN), once
	awk '!seen[$2 " " $3]++' "$out/writes.txt" > "$out/writes-unique.txt"
	pk=$(wc -l < "$out/writes-unique.txt")
	retx=$(( $(wc -l < "$out/writes.txt") - pk ))
	dma=$(awk '$1 == 6 || $1 == 10 {s += $4} END {print s + 0}' "$out/writes-unique.txt")
	ctl_other=$(tshark -r "$out/wire.pcapng" -Y "udp && !(udp.port == 4791) && !(udp.port == 9471)" 2>/dev/null | wc -l)
	ctl=$(tshark -r "$out/wire.pcapng" -Y "udp.port == 9471" 2>/dev/null | wc -l)
	echo "wire: $pk RDMA WRITE packets (+$retx retransmitted), $dma bytes announced in their RETH headers, $ctl control datagrams on UDP 9471, $ctl_other UDP packets on other ports"
	awk '{n[$1]++} END {printf "wire: opcodes First %d, Middle %d, Last %d, Only %d\n", n[6], n[7], n[8], n[10]}' "$out/writes-unique.txt"
	if [ "$pk" -eq 0 ] || [ "$dma" != "${bytes:-x}" ] || [ "$ctl_other" -ne 0 ] || [ "${ctl:-0}" -eq 0 ]; then
		echo "vm: FAIL wire proof (RETH bytes $dma vs verified ${bytes:-?})"
		fail=1
	fi
else
	echo "vm: FAIL no capture"
	fail=1
fi

# per-window keys: what opening and closing a window costs the language
# side (binds and invalidations posted and completed), against the mean
# time a window took in the same phase (its whole round)
wb=$(kv "$out/lang-gw.log" windows bind_us)
wc=$(kv "$out/lang-gw.log" windows close_us)
wn=$(kv "$out/lang-gw.log" windows bound)
ws=$(kv "$out/lang-gw.log" latency secs)
if [ -n "$wb" ] && [ -n "$wc" ] && [ "${wn:-0}" -gt 0 ] && [ -n "$ws" ]; then
	awk -v b="$wb" -v c="$wc" -v n="$wn" -v s="$ws" 'BEGIN {
		w = s * 1e6 / n
		printf "bench vm-window-keys: %.1f us per window (open %.1f + close %.1f, %d windows) (ratio %.4f vs the mean window of the same run, %.1f ms)\n",
			b + c, b, c, n, (b + c) / w, w / 1000 }'
fi
echo "vm: ${rooms:-0} rooms, ${bytes:-0} bytes verified over RoCEv2, $pk RDMA WRITE packets on the wire"
exit $fail
