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

# veth_up [PAIRS]: PAIRS (default 2) veth pairs VETHe<i> - VETHl<i> under a
# fresh random prefix VETH, up; veth_down (or the caller's EXIT trap)
# removes them
veth_up() {
	local n=${1:-2} i e
	[ -z "$VETH" ] || veth_down
	VETH=egw$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	for i in $(seq 0 $((n - 1))); do
		# VETH_APART=1: ifindexes far apart (X and X ^ 0x4000, X random,
		# tried again while taken), so that two gateways started close
		# together (neighbouring PIDs) never pick one net_af_packet fanout
		# group (getpid() ^ ifindex): "could not set PACKET_FANOUT"
		local made=0 x
		for _ in $(seq 1 20); do
			x=$((RANDOM % 16384 + 16384))
			if [ "${VETH_APART:-0}" = 1 ]; then
				ip link add "${VETH}e$i" index "$x" type veth peer \
					name "${VETH}l$i" index $((x ^ 0x4000)) 2>/dev/null
			else
				ip link add "${VETH}e$i" type veth peer name "${VETH}l$i" 2>/dev/null
			fi && { made=1; break; }
			[ "${VETH_APART:-0}" = 1 ] || break
		done
		if [ $made = 0 ]; then
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
