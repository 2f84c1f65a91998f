#!/usr/bin/env bash
# Write matching gateway configurations into DIR for processes on this host
# joined by net_memif, with the shm payload driver:
#   DIR/encode.cfg    enc-0: memif server on DIR/memif0.sock, lcore 1
#   DIR/encode1.cfg   enc-1: memif server on DIR/memif1.sock, lcore 0 (PEERS=2)
#   DIR/language.cfg  lang-0: one port per encode peer (lcores 0, 1)
# usage: gen-configs.sh DIR [DEFAULT_TOKENS [LANG_CAPACITY [TIMERS [PEERS [IDS]]]]]
# IDS > 1: enc-0 lists IDS language peers lang-0.0 .. lang-0.<IDS-1> at
# consecutive addresses, each with its own shm pool file - the identities
# `embgw-gen --identities IDS -f DIR/language.cfg` plays from one port.
set -euo pipefail
dir=$1
default=${2:-1024}
lang_cap=${3:-131072}
timers=${4:-}
peers=${5:-1}
ids=${6:-1}
mkdir -p "$dir"
rm -f "$dir"/memif*.sock
head -c 48 /dev/urandom > "$dir/psk.key"
chmod 600 "$dir/psk.key"

encode_cfg() { # index lcore
	cat <<CFG
gateway = {
  name = "enc-$1";
  roles = ["encode"];
  key_file = "psk.key";
  pool = { capacity_tokens = 262144; hidden_size = 256; dtype = "bf16"; };
  timers = { $timers };
};
ports = ( {
  name = "p0";
  device = "net_memif0,role=server,socket=$dir/memif$1.sock,socket-abstract=no";
  address = "192.168.7$((7 + $1)).1/24";
  lcores = [$2];
  payload = { driver = "shm"; path = "$dir/lang-pool-$1"; };
  peers = ( $(lang_peers "$1") );
} );
CFG
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
    device = "net_memif$1,role=client,socket=$dir/memif$1.sock,socket-abstract=no";
    address = "192.168.7$((7 + $1)).2/24";
    lcores = [$1];
    payload = { driver = "shm"; path = "$dir/lang-pool-$1"; };
    peers = ( { name = "enc-$1"; address = "192.168.7$((7 + $1)).1"; } );
  }
CFG
}

encode_cfg 0 1 > "$dir/encode.cfg"
[ "$peers" -ge 2 ] && encode_cfg 1 0 > "$dir/encode1.cfg"
{
	cat <<CFG
gateway = {
  name = "lang-0";
  roles = ["language"];
  key_file = "psk.key";
  pool = {
    capacity_tokens = $lang_cap; hidden_size = 256; dtype = "bf16";
    policy = { kind = "fixed"; tokens = $default; };
  };
  timers = { $timers };
};
ports = (
CFG
	lang_port 0
	[ "$peers" -ge 2 ] && { echo "  ,"; lang_port 1; }
	echo ");"
} > "$dir/language.cfg"
