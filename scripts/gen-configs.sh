#!/usr/bin/env bash
# Write matching gateway configurations into DIR for processes on this host,
# with the shm payload driver, joined by one link per encode peer:
#   DIR/encode.cfg    enc-0: link 0, lcore 1
#   DIR/encode1.cfg   enc-1: link 1, lcore 0 (PEERS=2)
#   DIR/language.cfg  lang-0: one port per encode peer (lcores 0, 1)
# usage: gen-configs.sh (--veth PREFIX | --memif) [--encode-identities N]
#                       [--pcap] [--attach] [--dtype T] [--hidden H]
#                       [--enc-capacity N] DIR
#                       [DEFAULT_TOKENS [LANG_CAPACITY [TIMERS [PEERS [IDS]]]]]
# --veth PREFIX: link i is net_af_packet on the veth pair PREFIXe<i>
# (enc-<i>'s end) and PREFIXl<i> (lang-0's end), which must exist and be up
# (tests/integration/lib.sh's veth_up makes them; doc/gateway.md, "Same-host
# devices"): either side may exit, be killed and restart on its own.
# --memif: link i is net_memif, enc-<i> the server on DIR/memif<i>.sock -
# for benchmarks whose processes exit in order only: a memif peer that
# leaves can crash the survivor, and a killed server leaves its socket.
# IDS > 1: enc-0 lists IDS language peers lang-0.0 .. lang-0.<IDS-1> at
# consecutive addresses, each with its own shm pool file - the identities
# `embgw-gen --identities IDS -f DIR/language.cfg` plays from one port.
# --encode-identities N: the mirror image: lang-0 lists N encode peers
# enc-0.0 .. enc-0.<N-1>, the identities `embgw-gen --produce --identities N
# -f DIR/encode.cfg` plays; enc-0's address moves to 192.168.77.101 so that
# its identities' consecutive addresses stay clear of lang-0's.
# --pcap: lang-0's port p0 is a net_pcap device instead of its link: it writes
# what it sends to DIR/out.pcap, reads the empty DIR/empty.pcap, and knows
# enc-0's MAC (nothing answers ARP from a file).
# --attach: engines attach to enc-0 at DIR/enc-0.sock and to lang-0 at
# DIR/lang-0.sock (doc/client.md). --dtype: the embedding type (bf16).
# --hidden: the hidden size (256). --enc-capacity: enc-*'s pool in tokens
# (262144; with a large hidden size the pools are that many times larger).
set -euo pipefail
enc_ids=1
link=""
veth=""
pcap=0
attach=0
dtype=bf16
hidden=256
enc_cap=262144
while [ $# -gt 0 ]; do
	case $1 in
	--veth) link=veth; veth=$2; shift 2 ;;
	--memif) link=memif; shift ;;
	--encode-identities) enc_ids=$2; shift 2 ;;
	--pcap) pcap=1; shift ;;
	--attach) attach=1; shift ;;
	--dtype) dtype=$2; shift 2 ;;
	--hidden) hidden=$2; shift 2 ;;
	--enc-capacity) enc_cap=$2; shift 2 ;;
	--*) echo "gen-configs.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] && [ -n "$link" ] || { sed -n '2,34s/^# \{0,1\}//p' "$0" >&2; exit 2; }
# an interface name has at most 15 characters
if [ "$link" = veth ] && { [ -z "$veth" ] || [ "${#veth}" -gt 13 ]; }; then
	echo "gen-configs.sh: --veth PREFIX: 1 to 13 characters" >&2
	exit 2
fi
dir=$1
default=${2:-1024}
lang_cap=${3:-131072}
timers=${4:-}
peers=${5:-1}
ids=${6:-1}
if [ "$link" = veth ]; then
	for i in $(seq 0 $((peers - 1))); do
		for e in "${veth}e$i" "${veth}l$i"; do
			[ -e "/sys/class/net/$e" ] || {
				echo "gen-configs.sh: no interface $e: make the veth pair first (tests/integration/lib.sh, veth_up)" >&2
				exit 2
			}
		done
	done
fi
mkdir -p "$dir"
rm -f "$dir"/memif*.sock "$dir/out.pcap"
# a pcap file with its header and no packets: nothing to receive
[ "$pcap" = 1 ] && printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00' > "$dir/empty.pcap"
head -c 48 /dev/urandom > "$dir/psk.key"
chmod 600 "$dir/psk.key"

attach_of() { # gateway name: its attach group, with --attach
	[ "$attach" = 1 ] && echo "  attach = { path = \"$dir/$1.sock\"; };"
	return 0
}

link_device() { # index side (e: the encode end, l: the language end)
	if [ "$link" = veth ]; then
		echo "net_af_packet$1,iface=$veth$2$1"
	elif [ "$2" = e ]; then
		echo "net_memif0,role=server,socket=$dir/memif$1.sock,socket-abstract=no"
	else
		echo "net_memif$1,role=client,socket=$dir/memif$1.sock,socket-abstract=no"
	fi
}

encode_cfg() { # index lcore
	cat <<CFG
gateway = {
  name = "enc-$1";
  roles = ["encode"];
  key_file = "psk.key";
  pool = { capacity_tokens = $enc_cap; hidden_size = $hidden; dtype = "$dtype"; };
  timers = { $timers };
$(attach_of "enc-$1")
};
ports = ( {
  name = "p0";
  device = "$(link_device "$1" e)";
  address = "$(enc_addr "$1")/24";
  lcores = [$2];
  payload = { driver = "shm"; path = "$dir/lang-pool-$1"; };
  peers = ( $(lang_peers "$1") );
} );
CFG
}

enc_addr() { # index: enc-<index>'s address (its first identity's)
	if [ "$1" = 0 ] && [ "$enc_ids" -gt 1 ]; then
		echo 192.168.77.101
	else
		echo "192.168.7$((7 + $1)).1"
	fi
}

enc_peers() { # index: the encode peer(s) of lang-0's port p<index>
	if [ "$enc_ids" -le 1 ] || [ "$1" != 0 ]; then
		echo "{ name = \"enc-$1\"; address = \"$(enc_addr "$1")\"; }"
		return
	fi
	for i in $(seq 0 $((enc_ids - 1))); do
		[ "$i" -gt 0 ] && printf ',\n      '
		printf '{ name = "enc-0.%d"; address = "192.168.77.%d"; }' "$i" $((101 + i))
	done
	echo
}

lang_device() { # index
	if [ "$1" = 0 ] && [ "$pcap" = 1 ]; then
		echo "net_pcap0,tx_pcap=$dir/out.pcap,rx_pcap=$dir/empty.pcap"
	else
		link_device "$1" l
	fi
}

lang_neighbours() { # index: static ARP where no peer can answer
	[ "$1" = 0 ] && [ "$pcap" = 1 ] &&
		echo "    neighbours = ( { address = \"$(enc_addr 0)\"; mac = \"02:00:00:00:77:01\"; } );"
	return 0
}

lang_peers() { # index: the language peer(s) of enc-<index>
	if [ "$ids" -le 1 ] || [ "$1" != 0 ]; then
		echo "{ name = \"lang-0\"; address = \"192.168.7$((7 + $1)).2\"; }"
		return
	fi
	for i in $(seq 0 $((ids - 1))); do
		[ "$i" -gt 0 ] && printf ',\n    '
		printf '{ name = "lang-0.%d"; address = "192.168.77.%d"; shm_path = "%s"; }' \
			"$i" $((2 + i)) "$dir/lang-pool-0.$i"
	done
	echo
}

lang_port() { # index
	cat <<CFG
  {
    name = "p$1";
    device = "$(lang_device "$1")";
    address = "192.168.7$((7 + $1)).2/24";
    lcores = [$1];
    payload = { driver = "shm"; path = "$dir/lang-pool-$1"; };
$(lang_neighbours "$1")
    peers = ( $(enc_peers "$1") );
  }
CFG
}

encode_cfg 0 1 | grep -v '^$' > "$dir/encode.cfg"
[ "$peers" -ge 2 ] && encode_cfg 1 0 | grep -v '^$' > "$dir/encode1.cfg"
{
	cat <<CFG
gateway = {
  name = "lang-0";
  roles = ["language"];
  key_file = "psk.key";
  pool = {
    capacity_tokens = $lang_cap; hidden_size = $hidden; dtype = "$dtype";
    policy = { kind = "fixed"; tokens = $default; };
  };
  timers = { $timers };
$(attach_of lang-0)
};
ports = (
CFG
	lang_port 0
	[ "$peers" -ge 2 ] && { echo "  ,"; lang_port 1; }
	echo ");"
} | grep -v '^$' > "$dir/language.cfg"
