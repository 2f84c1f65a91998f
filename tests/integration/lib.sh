#!/usr/bin/env bash
# Helpers to run embgw processes on this host: DPDK with --no-pci (added by
# embgw itself), --no-huge and a --file-prefix of their own, joined by
# net_af_packet on veth pairs of their own (veth_up); nothing leaves the
# machine. Every process runs under timeout, and only the processes and
# links started here (PIDS, VETH) are ever ended.
#
# EMBGW_BUILD names the build directory (meson passes its own; default
# build/); EMBGW and EMBGW_GEN override the two programs.
EMBGW_BUILD=${EMBGW_BUILD:-build}
EMBGW=${EMBGW:-$EMBGW_BUILD/app/embgw/embgw}
EMBGW_GEN=${EMBGW_GEN:-$EMBGW_BUILD/app/embgw-gen/embgw-gen}
EAL_COMMON="--no-huge -m 400"
PIDS=()

# eal NAME LCORES: EAL arguments of one process (its own file prefix)
eal() {
	echo "-l $2 $EAL_COMMON --file-prefix egw-$1-$$"
}

# start PROGRAM NAME LCORES CFG LOG SECONDS [app args...]: in the
# background; the PID (of its timeout wrapper) lands in PIDS
start() {
	local prog=$1 name=$2 lcores=$3 cfg=$4 log=$5 secs=$6
	shift 6
	# shellcheck disable=SC2046 # eal's words are separate arguments
	timeout -s INT "$secs" "$prog" $(eal "$name" "$lcores") -- -f "$cfg" "$@" \
		>"$log" 2>&1 &
	PIDS+=($!)
}

# start_gw NAME LCORES CFG LOG [app args...]: the gateway, in the background
start_gw() {
	local name=$1 lcores=$2 cfg=$3 log=$4
	shift 4
	start "$EMBGW" "$name" "$lcores" "$cfg" "$log" 120 "$@"
}

# start_gen NAME LCORES CFG LOG [app args...]: the generator, in the background
start_gen() {
	local name=$1 lcores=$2 cfg=$3 log=$4
	shift 4
	start "$EMBGW_GEN" "$name" "$lcores" "$cfg" "$log" 120 "$@"
}

# wait_fg PID: its exit status, as if it had run in the foreground; it is
# in PIDS meanwhile, so that an interrupt (which ends a wait at once, unlike
# a foreground command's) leaves it to the caller's trap to stop
wait_fg() {
	local rc=0
	PIDS+=("$1")
	wait "$1" || rc=$?
	PIDS=("${PIDS[@]:0:${#PIDS[@]}-1}")
	return "$rc"
}

# run_gw NAME LCORES CFG LOG SECONDS [app args...]: the gateway until it
# ends, interrupted (and so reporting) after SECONDS at the latest
run_gw() {
	local name=$1 lcores=$2 cfg=$3 log=$4 secs=$5
	shift 5
	# shellcheck disable=SC2046
	timeout -s INT "$secs" "$EMBGW" $(eal "$name" "$lcores") -- -f "$cfg" "$@" \
		>"$log" 2>&1 &
	wait_fg $!
}

# run_gen NAME LCORES CFG LOG SECONDS [app args...]: the generator, likewise
run_gen() {
	local name=$1 lcores=$2 cfg=$3 log=$4 secs=$5
	shift 5
	# shellcheck disable=SC2046
	timeout -s INT "$secs" "$EMBGW_GEN" $(eal "$name" "$lcores") -- -f "$cfg" "$@" \
		>"$log" 2>&1 &
	wait_fg $!
}

# ---- same-host links: veth pairs (doc/gateway.md, "Same-host devices") ----
# Each end is one gateway's net_af_packet device. The pair belongs to this
# shell, not to a gateway: either gateway may exit, be killed and start
# again while the other keeps its device. The kernel keeps out of the
# link: no address, no ARP, no IPv6, no forwarding on either end, so the
# only frames on it are the gateways'.
VETH=""

# Each end gets an ifindex of its own choosing (veth_add): DPDK 22.11's
# net_af_packet joins the PACKET_FANOUT group (getpid() ^ ifindex) & 0xffff
# of its network namespace, and a group already made by another process's
# socket on another interface refuses it ("could not set PACKET_FANOUT
# ... Invalid argument": no port). With the kernel's neighbouring
# ifindexes two gateways whose PIDs differ in the low bits that the
# indexes differ in collide (PIDs of processes started one after the
# other often do). Every index chosen here is VETH_IFX_LOW or
# VETH_IFX_LOW ^ 0x8000 modulo 65536 (the pairs alternate), so the groups
# of two interfaces differ by 0 or 0x8000 beyond their PIDs: two of our
# gateways collide only when their PIDs differ by exactly that in the low
# 16 bits - never where pid_max is 32768 or less (every PID below 0x8000)
# - and one gateway with ports on two neighbouring pairs (peer-killed's
# language side) never meets itself. The indexes of a pair also differ by
# more than 4194304 (the largest pid_max) in their whole value.
VETH_IFX_LOW=4660

# veth_add A B LOW: the veth pair A - B with ifindexes k * 65536 + LOW
# for random k in 64..32767, the two k's apart in a bit of
# 64 or more; an index taken (by a pair of another run) is drawn again
veth_add() {
	local ka kb err
	for _ in $(seq 1 20); do
		ka=$((64 + RANDOM % 32704))
		kb=$((64 + RANDOM % 32704))
		[ $((ka ^ kb)) -ge 64 ] || continue
		if err=$(ip link add "$1" index $((ka * 65536 + $3)) type veth \
			peer name "$2" index $((kb * 65536 + $3)) 2>&1); then
			return 0
		fi
		# a taken index says "File exists": draw again; anything else
		# (no root, no iproute2, no veth) is final
		case $err in
		*"File exists"*) ;;
		*) echo "     ip link add $1: $err" >&2; return 1 ;;
		esac
		ip link show "$1" >/dev/null 2>&1 && { echo "     $1 exists already" >&2; return 1; }
	done
	echo "     no free ifindexes for $1/$2 after 20 tries" >&2
	return 1
}

# veth_up [PAIRS]: PAIRS (default 2) veth pairs VETHe<i> - VETHl<i> under a
# fresh random prefix VETH, up; veth_down (or the caller's EXIT trap)
# removes them
veth_up() {
	local n=${1:-2} i e
	[ -z "$VETH" ] || veth_down
	VETH=egw$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	for i in $(seq 0 $((n - 1))); do
		if ! veth_add "${VETH}e$i" "${VETH}l$i" \
			$((VETH_IFX_LOW ^ (i % 2) * 0x8000)); then
			echo "     cannot create the veth pair ${VETH}e$i/${VETH}l$i (root and iproute2 needed: scripts/deps.sh installs it)" >&2
			veth_down
			return 1
		fi
		for e in "${VETH}e$i" "${VETH}l$i"; do
			# before the link is up, so that the kernel never speaks on it
			[ -w "/proc/sys/net/ipv6/conf/$e/disable_ipv6" ] &&
				echo 1 >"/proc/sys/net/ipv6/conf/$e/disable_ipv6"
			echo 0 >"/proc/sys/net/ipv4/conf/$e/forwarding"
			ip link set "$e" arp off up || { veth_down; return 1; }
		done
	done
}

# veth_down: the pairs veth_up made are gone (deleting one end deletes both)
veth_down() {
	local e
	[ -n "$VETH" ] || return 0
	for e in $(ip -o link show 2>/dev/null | sed -nE "s/^[0-9]+: (${VETH}e[0-9]+)@.*/\1/p"); do
		ip link del "$e" 2>/dev/null
	done
	VETH=""
}

# ---- network namespaces, for routed topologies ----------------------------
# A case that needs a router between two gateways moves veth ends into
# namespaces of its own (netns_add); netns_down (or the caller's EXIT
# trap) deletes them, and with them the veth ends inside.
NETNS=()

# netns_add NAME: a fresh namespace, its loopback up
netns_add() {
	ip netns add "$1" || return 1
	NETNS+=("$1")
	ip -n "$1" link set lo up
}

# netns_link NS IF [ADDR/LEN]: veth end IF moved into NS and up there;
# with ADDR the kernel there owns the address (a router's interface),
# without it the kernel stays out of the link as veth_up has it (no ARP,
# no IPv6): a gateway's net_af_packet end
netns_link() {
	ip link set "$2" netns "$1" || return 1
	# (where the kernel has IPv6 at all)
	ip netns exec "$1" sh -c "f=/proc/sys/net/ipv6/conf/$2/disable_ipv6; [ ! -w \$f ] || echo 1 >\$f" ||
		return 1
	if [ -n "${3:-}" ]; then
		ip -n "$1" link set "$2" arp on up &&
			ip -n "$1" addr add "$3" dev "$2"
	else
		ip -n "$1" link set "$2" arp off up
	fi
}

# netns_down: the namespaces netns_add made are gone
netns_down() {
	local n
	for n in "${NETNS[@]}"; do
		ip netns del "$n" 2>/dev/null
	done
	NETNS=()
}

# netns_wrap NS PROGRAM OUT: OUT is an executable that runs PROGRAM in NS
# (for start/run_gw, which take a program)
netns_wrap() {
	printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$1" "$(realpath "$2")" >"$3" &&
		chmod +x "$3"
}

# wait_socket PATH: a socket file exists (an attach socket, a memif server's)
wait_socket() {
	for _ in $(seq 1 200); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	echo "     no socket $1 after 10 s" >&2
	return 1
}

# wait_ready NAME: gateway NAME (one of ours) has set up its ports
# (/embgw/stats is registered then)
wait_ready() {
	for _ in $(seq 1 40); do
		case $(telemetry "$1" /embgw/stats) in
		'{"/embgw/stats": {'*) return 0 ;;
		esac
		sleep 0.25
	done
	echo "     $1 did not answer /embgw/stats within 20 s" >&2
	return 1
}

# wait_line LOG SECTION SECONDS [COUNT]: LOG holds COUNT (default 1) report
# lines of SECTION, i.e. COUNT ports have reported
wait_line() {
	local n=${4:-1}
	for _ in $(seq 1 $(($3 * 10))); do
		[ "$(grep -c "^$2: " "$1")" -ge "$n" ] && return 0
		sleep 0.1
	done
	echo "     $1: no $n '$2:' line(s) after $3 s" >&2
	return 1
}

# wait_registered LOG SECONDS: the gateway writing LOG has registered with
# its peer (before then a room asked for fails as the peer's)
wait_registered() {
	for _ in $(seq 1 $(($2 * 10))); do
		grep -q "peer .* registered" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "     $1: no peer registered within $2 s" >&2
	return 1
}

# attach_lease MS CFG...: the attach group that gen-configs.sh --attach
# wrote into each CFG gets lease_ms = MS
attach_lease() {
	local ms=$1
	shift
	sed -i "s|^\(  attach = { path = \"[^\"]*\";\) };|\1 lease_ms = $ms; };|" "$@" || return 1
	for cfg in "$@"; do
		grep -q "lease_ms = $ms;" "$cfg" || { echo "     $cfg: no attach group" >&2; return 1; }
	done
}

# end_gw SIG PID: signal SIG to the program under the timeout wrapper PID
# (one of ours), which is then reaped (a program that does not end within
# 30 s is killed) and forgotten
end_gw() {
	local child rest=()
	child=$(pgrep -P "$2")
	[ -n "$child" ] && kill "-$1" "$child"
	for _ in $(seq 1 300); do
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$2" 2>/dev/null; then
		echo "     $2 did not end within 30 s of SIG$1" >&2
		kill -9 "${child:-$2}"
	fi
	wait "$2" 2>/dev/null
	for p in "${PIDS[@]}"; do
		[ "$p" != "$2" ] && rest+=("$p")
	done
	PIDS=("${rest[@]}")
}

# child_of PID: the program under the timeout wrapper PID (one of ours),
# once it runs (exec'd: a signal before that would meet the wrapper's
# child, not the program; at most 5 s)
child_of() {
	local c
	for _ in $(seq 1 500); do
		c=$(pgrep -P "$1")
		case $(readlink "/proc/$c/exe" 2>/dev/null) in
		*/embgw|*/embgw-gen) echo "$c"; return 0 ;;
		esac
		sleep 0.01
	done
	return 1
}

# wait_exit PID: the exit status of the timeout wrapper PID (one of ours),
# which is then forgotten
wait_exit() {
	local rc rest=()
	wait "$1"
	rc=$?
	for p in "${PIDS[@]}"; do
		[ "$p" != "$1" ] && rest+=("$p")
	done
	PIDS=("${rest[@]}")
	return $rc
}

# kill_gw PID: SIGKILL, no goodbye at all (end_gw)
kill_gw() {
	end_gw KILL "$1"
}

# alive PID: process PID (one of ours) is running, not a zombie
alive() {
	[ -r "/proc/$1/stat" ] && ! awk '{ exit !($3 == "Z" || $3 == "X") }' "/proc/$1/stat"
}

stop_all() {
	for p in "${PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	PIDS=()
}

# telemetry NAME PATH: the JSON answer of process NAME (one of ours) to an
# rte_telemetry command, one line
telemetry() {
	echo "$2" | timeout 5 dpdk-telemetry.py -f "egw-$1-$$" 2>/dev/null |
		/usr/bin/python3 -c '
import json, sys
text = sys.stdin.read()
start = text.find("{")
print(json.dumps(json.JSONDecoder().raw_decode(text[start:])[0]) if start >= 0 else "")'
}

# tel_hammer NAME PATH OUT: in the background, PATH asked of process NAME
# (one of ours) over its telemetry socket, again and again on one
# connection, until the process closes it; OUT then holds the number of
# answers that named a port. TEL_HAMMER is the reader's PID.
TEL_HAMMER=""
tel_hammer() {
	/usr/bin/python3 - "/var/run/dpdk/egw-$1-$$/dpdk_telemetry.v2" "$2" "$3" <<'PY' &
import socket, sys, time
path, cmd, out = sys.argv[1:4]
deadline = time.monotonic() + 60
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
while True:
    try:
        s.connect(path)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.01)
answers = 0
try:
    s.recv(16384)  # the greeting
    while time.monotonic() < deadline:
        s.send(cmd.encode())
        reply = s.recv(1 << 20)
        if not reply:
            break
        answers += b'"p0"' in reply
except OSError:
    pass
open(out, "w").write("%d\n" % answers)
PY
	# shellcheck disable=SC2034 # read by run.sh, which sources this file
	TEL_HAMMER=$!
}

# tel_value JSON PATH PORT KEY: one counter of a telemetry answer
tel_value() {
	/usr/bin/python3 -c '
import json, sys
try:
    print(json.loads(sys.argv[1])[sys.argv[2]][sys.argv[3]][sys.argv[4]])
except (ValueError, KeyError, TypeError):
    pass' "$1" "$2" "$3" "$4"
}

# wait_counter NAME PATH PORT KEY MIN SECONDS: poll process NAME's telemetry
# command PATH until PORT's counter KEY reaches MIN; the last answer stays
# in TEL
TEL=""
wait_counter() {
	local v deadline=$((SECONDS + $6))
	while :; do
		TEL=$(telemetry "$1" "$2")
		v=$(tel_value "$TEL" "$2" "$3" "$4")
		[ "${v:-0}" -ge "$5" ] && return 0
		[ "$SECONDS" -ge "$deadline" ] && break
		sleep 0.2
	done
	echo "     $1: $2 $3 $4 is ${v:-unanswered}, not $5, after $6 s" >&2
	return 1
}

# Reports are lines "SECTION: port=NAME key=value ..." (or without port=
# for the generator's totals).
# field LOG SECTION KEY [PORT]: KEY's value on the last SECTION line of PORT
# (default p0; "" for a section without port=, "*" for any port)
field() {
	awk -v s="$2:" -v k="$3=" -v p="${4-p0}" '
		$1 == s && (p == "*" || (p == "" && $2 !~ /^port=/) ||
			    $2 == "port=" p) {
			v = ""
			for (i = 2; i <= NF; i++)
				if (index($i, k) == 1)
					v = substr($i, length(k) + 1)
		}
		END { print v }' "$1"
}

# expect LOG SECTION KEY OP VALUE [PORT]: the value exists and compares
expect() {
	local v
	v=$(field "$1" "$2" "$3" "${6-p0}")
	[ -n "$v" ] && test "$v" "$4" "$5" 2>/dev/null
}

# failures LOG PORT: "reason=count" of each failure reason of PORT's rooms
failures() {
	awk -v p="port=$2" '$1 == "failed:" && $2 == p {
		r = ""; c = ""
		for (i = 3; i <= NF; i++) {
			if ($i ~ /^reason=/) r = substr($i, 8)
			if ($i ~ /^count=/) c = substr($i, 7)
		}
		print r "=" c
	}' "$1"
}

# failed_count LOG PORT REASON: rooms of PORT failed for REASON (0 if none)
failed_count() {
	local n
	n=$(failures "$1" "$2" | sed -n "s/^$3=//p" | tail -1)
	echo "${n:-0}"
}

# report LOG: the report lines of LOG, for a failure message
report() {
	grep -E '^[a-z-]+: ' "$1" | grep -E '(^| )[a-z_]+=' | tr '\n' ';'
}

# ---- hugepages, for the cases whose gateways DPDK's tools attach to -----
# A secondary process (dpdk-dumpcap, dpdk-proc-info) maps its primary's
# memory from hugepage files: a --no-huge gateway has none to share. These
# reserve HUGE_N more 2 MiB pages on top of what the machine has, mount a
# hugetlbfs of the case's own (HUGE_DIR) for the gateways' files, and give
# both back; the EXIT trap and run_case call hugepages_down.
HUGE_SYS=/sys/kernel/mm/hugepages/hugepages-2048kB
HUGE_DIR=""
HUGE_N=0

# hugepages_up N DIR: N more pages reserved, a hugetlbfs mounted on DIR
hugepages_up() {
	local before free
	[ -w "$HUGE_SYS/nr_hugepages" ] || { echo "     no 2 MiB hugepages here ($HUGE_SYS; root needed)" >&2; return 1; }
	before=$(cat "$HUGE_SYS/free_hugepages")
	echo $(($(cat "$HUGE_SYS/nr_hugepages") + $1)) >"$HUGE_SYS/nr_hugepages" || return 1
	HUGE_N=$1
	free=$(cat "$HUGE_SYS/free_hugepages")
	if [ "$((free - before))" -lt "$1" ]; then
		echo "     the kernel found $((free - before)) of $1 more 2 MiB pages (memory fragmented?)" >&2
		hugepages_down
		return 1
	fi
	mkdir -p "$2" && mount -t hugetlbfs -o pagesize=2M nodev "$2" || { hugepages_down; return 1; }
	HUGE_DIR=$2
}

# hugepages_down: the files of our gateways removed, the mount and the
# pages given back (the kernel frees pages as their files go)
hugepages_down() {
	if [ -n "$HUGE_DIR" ]; then
		find "$HUGE_DIR" -maxdepth 1 -type f -delete
		umount "$HUGE_DIR" && rmdir "$HUGE_DIR"
		HUGE_DIR=""
	fi
	if [ "$HUGE_N" -gt 0 ]; then
		echo $(($(cat "$HUGE_SYS/nr_hugepages") - HUGE_N)) >"$HUGE_SYS/nr_hugepages"
		HUGE_N=0
	fi
}
