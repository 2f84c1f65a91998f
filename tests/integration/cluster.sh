# shellcheck shell=bash disable=SC2034 # run.sh reads the globals set here
# The cluster topology of the integration cases (run.sh sources this file
# after lib.sh): gateways in network namespaces of their own, joined by a
# Linux bridge, and Debian's etcd in the root namespace.
#
#   root namespace                        namespace CL-<gw> (one per gateway)
#   CLbd  data bridge, no address   <-->  CL<gw>d  net_af_packet (DPDK), no
#                                                  kernel address, ARP off
#   CLbc  control bridge, CL_NET.1  <-->  CL<gw>c  CL_NET.<n>: the kernel's
#         etcd listens here too                    route to etcd
#
# A gateway's port is its namespace's data veth. Only one net_af_packet
# socket lives in each namespace, so the PACKET_FANOUT groups of two
# gateways (per namespace, lib.sh's ifindex note) never meet. Its control
# thread is a normal socket of the process: it reaches etcd through the
# namespace's kernel address on the control bridge, where etcd listens
# besides 127.0.0.1 (etcdctl's address). The two bridges keep the kernel's
# TCP away from the gateways' ports.
#
# Every namespace, link and process made here is recorded (CL_NS, CL_LINKS,
# CL_PID, ETCD_PID) and ended by cl_down - the runner's EXIT trap and
# run_case call it - never anything else. Gateways run under timeout, etcd
# too.
CL=""
CL_NET=""
CL_NS=()
CL_LINKS=()
declare -A CL_PID=()  # gateway name -> PID of its timeout wrapper
declare -A CL_ADDR=() # gateway name -> its port's address
declare -A CL_CTL=()  # gateway name -> its namespace's control address
CL_N=0
# the lifetime of a cluster case's processes, in seconds
CL_SECS=${CL_SECS:-240}

# ---- links and namespaces --------------------------------------------------
# cl_link_quiet DEV: no IPv6, no forwarding, no ARP on DEV (the kernel
# never speaks on a data link), before it comes up
cl_link_quiet() {
	local ns=$1 dev=$2
	ip netns exec "$ns" sh -c "
		echo 1 >/proc/sys/net/ipv6/conf/$dev/disable_ipv6 2>/dev/null
		echo 0 >/proc/sys/net/ipv4/conf/$dev/forwarding
		ip link set $dev arp off up"
}

# cl_up: the two bridges, under a fresh random prefix CL, and a control
# subnet CL_NET.0/24 that no interface here has
cl_up() {
	local x
	[ -z "$CL" ] || cl_down
	CL=egc$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
	for _ in $(seq 1 20); do
		x=$((16 + RANDOM % 224))
		ip -o -4 addr show | grep -q " 10\.251\.$x\." || { CL_NET=10.251.$x; break; }
	done
	[ -n "$CL_NET" ] || { echo "     no free 10.251.x.0/24 for the control bridge" >&2; return 1; }
	ip link add "${CL}bd" type bridge || { echo "     cannot create a bridge (root and iproute2 needed)" >&2; return 1; }
	CL_LINKS+=("${CL}bd")
	ip link add "${CL}bc" type bridge || return 1
	CL_LINKS+=("${CL}bc")
	# the data bridge forwards at once (no STP learning delay) and carries
	# no kernel traffic of the root namespace
	echo 1 >"/proc/sys/net/ipv6/conf/${CL}bd/disable_ipv6"
	ip link set "${CL}bd" type bridge forward_delay 0 stp_state 0 &&
		ip link set "${CL}bd" arp off up || return 1
	ip link set "${CL}bc" type bridge forward_delay 0 stp_state 0 &&
		ip addr add "$CL_NET.1/24" dev "${CL}bc" && ip link set "${CL}bc" up
}

# cl_node NAME: gateway NAME's namespace CL-NAME with its data and control
# veths on the bridges; its port address (192.168.77.<10+n>) and control
# address (CL_NET.<10+n>) land in CL_ADDR and CL_CTL. NAME: at most 5
# characters beyond the prefix (an interface name has at most 15).
cl_node() {
	local name=$1 ns=$CL-$1 n
	n=$((10 + CL_N))
	CL_N=$((CL_N + 1))
	ip netns add "$ns" || return 1
	CL_NS+=("$ns")
	ip -n "$ns" link set lo up
	# the data pair: its namespace end is the gateway's port
	ip link add "${CL}${name}d" type veth peer name "${CL}${name}D" || return 1
	CL_LINKS+=("${CL}${name}D")
	ip link set "${CL}${name}d" netns "$ns" || return 1
	echo 1 >"/proc/sys/net/ipv6/conf/${CL}${name}D/disable_ipv6"
	ip link set "${CL}${name}D" master "${CL}bd" arp off up || return 1
	cl_link_quiet "$ns" "${CL}${name}d" || return 1
	# the control pair: a kernel address of the namespace, etcd's route
	ip link add "${CL}${name}c" type veth peer name "${CL}${name}C" || return 1
	CL_LINKS+=("${CL}${name}C")
	ip link set "${CL}${name}c" netns "$ns" || return 1
	ip link set "${CL}${name}C" master "${CL}bc" up || return 1
	ip -n "$ns" addr add "$CL_NET.$n/24" dev "${CL}${name}c" &&
		ip -n "$ns" link set "${CL}${name}c" up || return 1
	CL_ADDR[$name]=192.168.77.$n
	CL_CTL[$name]=$CL_NET.$n
}

# cl_down: every gateway and etcd stopped (by PID), every namespace and
# link made here deleted; safe to call twice, and under set -e (a trap of
# scripts/bench.sh's)
cl_down() {
	local l ns name p
	# the engines of an interrupted case (a finished one waited for them)
	if [ -n "$CL" ]; then
		for p in "${ENGINE_PIDS[@]}"; do
			engine_kill "$p"
		done
		ENGINE_PIDS=()
	fi
	for name in "${!CL_PID[@]}"; do
		kill -INT "${CL_PID[$name]}" 2>/dev/null
	done
	for name in "${!CL_PID[@]}"; do
		wait "${CL_PID[$name]}" 2>/dev/null || true
	done
	CL_PID=()
	etcd_stop
	for ns in "${CL_NS[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	for l in "${CL_LINKS[@]}"; do
		ip link del "$l" 2>/dev/null
	done
	CL_NS=()
	CL_LINKS=()
	CL_ADDR=()
	CL_CTL=()
	CL_N=0
	CL=""
	CL_NET=""
	CL_KEY=""
}

# ---- etcd --------------------------------------------------------------------
ETCD_PID=""
ETCD_PORT=""
ETCD_PEER_PORT=""
ETCD_DIR=""

# cl_free_port: a TCP port nothing listens on now, here or on CL_NET.1
cl_free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return 0; }
	done
	echo "     no free TCP port found" >&2
	return 1
}

# etcd_start LOG: Debian's etcd on 127.0.0.1 and the control bridge's
# address (where cl_up made one), a free port, a data directory of its own (kept across
# etcd_kill/etcd_start: a restart finds its keys and leases); up once it
# answers
etcd_start() {
	local log=$1
	command -v etcd >/dev/null || { echo "     no etcd (scripts/deps.sh installs etcd-server)" >&2; return 1; }
	[ -n "$ETCD_DIR" ] || ETCD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/embgw-etcd.XXXXXX") || return 1
	if [ -z "$ETCD_PORT" ]; then
		ETCD_PORT=$(cl_free_port) && ETCD_PEER_PORT=$(cl_free_port) || return 1
		[ "$ETCD_PORT" != "$ETCD_PEER_PORT" ] || ETCD_PEER_PORT=$((ETCD_PORT + 1))
	fi
	# without the cluster topology (cl_up), on loopback alone
	local urls=http://127.0.0.1:$ETCD_PORT
	[ -z "$CL_NET" ] || urls=$urls,http://$CL_NET.1:$ETCD_PORT
	# without the descriptors of locks taken around the run (flock's on
	# /tmp/embgw-gw.lock): an etcd left behind must not hold them
	cl_no_locks timeout -s TERM "$CL_SECS" etcd --name egw --data-dir "$ETCD_DIR/data" \
		--listen-client-urls "$urls" --advertise-client-urls "${urls##*,}" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "egw=http://127.0.0.1:$ETCD_PEER_PORT" \
		--log-level warn >>"$log" 2>&1 &
	ETCD_PID=$!
	for _ in $(seq 1 100); do
		ectl endpoint health >/dev/null 2>&1 && return 0
		alive "$ETCD_PID" || break
		sleep 0.1
	done
	echo "     etcd did not answer on 127.0.0.1:$ETCD_PORT within 10 s" >&2
	return 1
}

# cl_no_locks CMD...: CMD with the descriptors above 2 that this shell
# inherited on *.lock files closed (exec'd: the PID is CMD's)
cl_no_locks() {
	local fd
	for fd in "/proc/$BASHPID/fd"/*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] 2>/dev/null || continue
		case $(readlink "/proc/$BASHPID/fd/$fd" 2>/dev/null) in
		*.lock) eval "exec $fd>&-" ;;
		esac
	done
	exec "$@"
}

# etcd_kill: SIGKILL (to etcd itself, under its timeout wrapper), reaped
etcd_kill() {
	local c
	[ -n "$ETCD_PID" ] || return 0
	c=$(pgrep -P "$ETCD_PID")
	[ -n "$c" ] && kill -KILL "$c"
	wait "$ETCD_PID" 2>/dev/null || true
	ETCD_PID=""
}

# etcd_stop: etcd ended (SIGTERM, then SIGKILL after 10 s), its data
# directory removed
etcd_stop() {
	if [ -n "$ETCD_PID" ]; then
		kill -TERM "$ETCD_PID" 2>/dev/null
		for _ in $(seq 1 100); do
			kill -0 "$ETCD_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$ETCD_PID" 2>/dev/null && etcd_kill
		wait "$ETCD_PID" 2>/dev/null || true
		ETCD_PID=""
	fi
	[ -z "$ETCD_DIR" ] || rm -rf "$ETCD_DIR"
	ETCD_DIR=""
	ETCD_PORT=""
	ETCD_PEER_PORT=""
}

# ectl ARGS...: etcdctl (v3 API) against the case's etcd
ectl() {
	ETCDCTL_API=3 timeout 10 etcdctl --endpoints="http://127.0.0.1:$ETCD_PORT" \
		--dial-timeout=2s --command-timeout=5s "$@"
}

# cl_key CLUSTER NAME: the key of gateway NAME's record
cl_key() {
	echo "/embgw/$1/$2"
}

# cl_has_key CLUSTER NAME: etcd holds NAME's record
cl_has_key() {
	[ -n "$(ectl get --print-value-only "$(cl_key "$1" "$2")" 2>/dev/null)" ]
}

# cl_members CLUSTER: the names with a record under the cluster's prefix
# (keys one level below it: deeper ones are not records, cluster.md),
# sorted, space-separated
cl_members() {
	ectl get --prefix --keys-only "/embgw/$1/" 2>/dev/null |
		sed -n "s|^/embgw/$1/\([^/][^/]*\)\$|\1|p" | sort | tr '\n' ' ' | sed 's/ $//'
}

# wait_key CLUSTER NAME PRESENT SECONDS: NAME's record is there (PRESENT
# 1) or gone (0) within SECONDS; the time it took lands in WAITED_MS
WAITED_MS=0
wait_key() {
	local t0 have deadline=$((SECONDS + $4))
	t0=$(date +%s%N)
	while :; do
		have=0
		cl_has_key "$1" "$2" && have=1
		if [ "$have" = "$3" ]; then
			WAITED_MS=$((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		[ "$SECONDS" -lt "$deadline" ] || break
		sleep 0.05
	done
	echo "     /embgw/$1/$2: present=$have, not $3, after $4 s" >&2
	return 1
}

# ---- gateways ----------------------------------------------------------------
# The gateways' geometry, one for all (a record of another geometry is
# skipped, doc/cluster.md): bf16, hidden 256, blocks of the default size.
# Every gateway's port has one lcore; CL_LCORE alternates 1 and 0.
CL_LCORE=1
CL_KEY=""

# cl_cluster_group CLUSTER: the gateway.cluster group of a gateway that
# joins CLUSTER through the case's etcd (doc/cluster.md), with a lease of
# CL_TTL seconds (default 4); requests time out within a third of it
cl_cluster_group() {
	echo "  cluster = { name = \"$1\"; endpoints = [\"http://$CL_NET.1:$ETCD_PORT\"];"
	echo "              lease_ttl_s = ${CL_TTL:-4}; request_timeout_ms = 1000; dial_timeout_ms = 500; };"
}

# cl_peer NAME: a static peer entry for gateway NAME (an encode
# gateway's language peers carry their pool file)
cl_peer() {
	case $1 in
	l*) echo "{ name = \"$1\"; address = \"${CL_ADDR[$1]}\"; shm_path = \"$T/pool-$1\"; }" ;;
	*) echo "{ name = \"$1\"; address = \"${CL_ADDR[$1]}\"; }" ;;
	esac
}

# cl_cfg NAME CLUSTER TIMERS [STATIC PEERS...]: T/NAME.cfg, gateway NAME
# (e*: encode, l*: language) on its namespace's data veth, an attach
# socket T/NAME.sock, joining CLUSTER ("": no cluster group) and listing
# the static peers named
cl_cfg() {
	local name=$1 cluster=$2 timers=$3 role=encode pool peers="" p
	shift 3
	[ -n "$CL_KEY" ] || {
		CL_KEY=$T/psk.key
		head -c 48 /dev/urandom >"$CL_KEY"
		chmod 600 "$CL_KEY"
	}
	pool="capacity_tokens = 262144; hidden_size = 256; dtype = \"bf16\";"
	case $name in
	l*)
		role=language
		pool="$pool policy = { kind = \"fixed\"; tokens = 1024; };"
		;;
	esac
	for p in "$@"; do
		peers="$peers${peers:+, }$(cl_peer "$p")"
	done
	cat <<-CFG | grep -v '^$' >"$T/$name.cfg"
		gateway = {
		  name = "$name";
		  roles = ["$role"];
		  key_file = "$CL_KEY";
		  pool = { $pool };
		  timers = { $timers };
		  attach = { path = "$T/$name.sock"; };
		$(if [ -n "$cluster" ]; then cl_cluster_group "$cluster"; fi)
		};
		ports = ( {
		  name = "p0";
		  device = "net_af_packet0,iface=${CL}${name}d";
		  address = "${CL_ADDR[$name]}/24";
		  lcores = [$CL_LCORE];
		  payload = { driver = "shm"; path = "$T/pool-$name"; };
		  peers = ( $peers );
		} );
		CFG
	CL_LCORE=$((1 - CL_LCORE))
}

# cl_start NAME [app args...]: gateway NAME in its namespace, in the
# background (log T/NAME.log); its wrapper's PID in CL_PID[NAME]. The
# lcore is the one its configuration names.
cl_start() {
	local name=$1 lc
	shift
	lc=$(sed -n 's/^  lcores = \[\([0-9]*\)\];$/\1/p' "$T/$name.cfg")
	# shellcheck disable=SC2046 # eal's words are separate arguments
	ip netns exec "$CL-$name" timeout -s INT "$CL_SECS" "$EMBGW" $(eal "$name" "${lc:-0}") \
		-- -f "$T/$name.cfg" "$@" >>"$T/$name.log" 2>&1 &
	CL_PID[$name]=$!
}

# cl_wait_up NAMES...: each gateway has set up its port and its attach
# socket is there
cl_wait_up() {
	local name
	for name in "$@"; do
		wait_ready "$name" && wait_socket "$T/$name.sock" || {
			LOG=$T/$name.log
			return 1
		}
	done
}

# cl_end SIG NAME: signal SIG to gateway NAME (under its wrapper), reaped
# (killed after 30 s) and forgotten; its exit status in CL_RC
CL_RC=0
cl_end() {
	local pid=${CL_PID[$2]} child
	child=$(pgrep -P "$pid")
	[ -n "$child" ] && kill "-$1" "$child"
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && { echo "     $2 did not end within 30 s of SIG$1" >&2; kill -9 "${child:-$pid}"; }
	CL_RC=0
	wait "$pid" 2>/dev/null || CL_RC=$?
	unset "CL_PID[$2]"
}

# cl_stop_all: every gateway stopped with SIGINT (its report written)
cl_stop_all() {
	local name
	for name in "${!CL_PID[@]}"; do
		kill -INT "${CL_PID[$name]}" 2>/dev/null
	done
	for name in "${!CL_PID[@]}"; do
		wait "${CL_PID[$name]}" 2>/dev/null || true
	done
	CL_PID=()
}

# ---- engines -----------------------------------------------------------------
# Room ids of the cluster cases: the length in the low 32 bits, above it
# the run, the encode and the language gateway's numbers and the room's
# index, so that every room of a case is unique and both sides know it.
# cl_rooms RUN ENC LANG LENGTHS...: comma-separated ids
cl_rooms() {
	local run=$1 e=$2 l=$3 out="" k=0 n
	shift 3
	for n in "$@"; do
		out+="${out:+,}$(( ((((run * 16 + e) * 16 + l) * 16 + k) << 32) + n ))"
		k=$((k + 1))
	done
	echo "$out"
}

# cl_load RUN ENCS LANGS LENGTHS: engines moving rooms between every encode
# gateway of ENCS and every language gateway of LANGS (space-separated
# names e<i>, l<j>), one encode engine per encode gateway, one language
# engine per language gateway naming each room's peer; logs
# T/eng-RUN-<gw>.log. The encode engines start once the language ones have
# opened their rooms; CL_HOLD: seconds they keep their rooms open before
# committing (an event lands while rooms are in flight). CL_GO=1: the
# encode engines open their rooms only once T/go-RUN exists (cl_go), so
# that their holds run together.
cl_load() {
	local run=$1 encs=$2 langs=$3 lengths=$4 e l ids peers r
	# shellcheck disable=SC2206 # the lengths are words
	local lens=(${lengths//,/ })
	for l in $langs; do
		ids=""
		peers=""
		for e in $encs; do
			r=$(cl_rooms "$run" "${e#e}" "${l#l}" "${lens[@]}")
			ids+="${ids:+,}$r"
			for _ in "${lens[@]}"; do
				peers+="${peers:+,}$(cl_name "$e")"
			done
		done
		engine "$T/eng-$run-$l.log" language "$T/$l.sock" --rooms "$ids" --peer "$peers"
	done
	sleep 1
	for e in $encs; do
		ids=""
		for l in $langs; do
			ids+="${ids:+,}$(cl_rooms "$run" "${e#e}" "${l#l}" "${lens[@]}")"
		done
		# shellcheck disable=SC2046 # --go FILE: two words or none
		engine "$T/eng-$run-$e.log" encode "$T/$e.sock" --rooms "$ids" \
			--hold-s "${CL_HOLD:-0}" $([ -z "${CL_GO:-}" ] || echo --go "$T/go-$run")
	done
}

# cl_go RUN ENCS: once every encode engine of run RUN (started with
# CL_GO=1) has made its data, they all open their rooms; back once each
# has
cl_go() {
	local e
	for e in $2; do
		wait_log "$T/eng-$1-$e.log" "^engine-ready:" 90 || { MSG="the engine of $e never got ready: $(tr '\n' ' ' <"$T/eng-$1-$e.log")"; return 1; }
	done
	touch "$T/go-$1"
	for e in $2; do
		wait_log "$T/eng-$1-$e.log" "^engine-opened:" 30 || { MSG="the engine of $e opened no room"; return 1; }
	done
}

# cl_name GW: the gateway's name as its records and peers know it (e0 ->
# e0: the topology's short names are the gateways' names)
cl_name() {
	echo "$1"
}

# cl_engines_ok RUN GWS: every engine of run RUN on gateways GWS ended 0
# and its line says every room landed (language) or succeeded (encode)
cl_engines_ok() {
	local run=$1 g f bad=""
	engines_wait || bad="an engine failed"
	for g in $2; do
		f=$T/eng-$run-$g.log
		case $g in
		l*) grep -qE '^engine-language: .* bad=0 failed=0 ' "$f" || bad="$bad $g" ;;
		*) grep -qE '^engine-encode: .* failed=0$' "$f" || bad="$bad $g" ;;
		esac
	done
	[ -z "$bad" ] || { MSG="run $run:$bad: $(cat "$T"/eng-"$run"-*.log | tr '\n' ' ' | cut -c1-600)"; return 1; }
}
