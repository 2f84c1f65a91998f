#!/usr/bin/env bash
# Write a matching pair of gateway configurations into DIR for two
# processes on this host joined by net_memif, with the shm payload driver:
#   DIR/encode.cfg (lcore 1, memif server)  DIR/language.cfg (lcore 0, client)
# usage: gen-configs.sh DIR [DEFAULT_TOKENS] [LANG_CAPACITY_TOKENS] [EXTRA_TIMERS]
set -euo pipefail
dir=$1
default=${2:-1024}
lang_cap=${3:-131072}
timers=${4:-}
mkdir -p "$dir"
head -c 48 /dev/urandom > "$dir/psk.key"
chmod 600 "$dir/psk.key"
cat > "$dir/encode.cfg" <<CFG
gateway = {
  name = "enc-0";
  roles = ["encode"];
  key_file = "psk.key";
  pool = { capacity_tokens = 262144; hidden_size = 256; dtype = "bf16"; };
  timers = { $timers };
};
ports = ( {
  name = "p0";
  device = "net_memif0,role=server,socket=$dir/memif.sock,socket-abstract=no";
  address = "192.168.77.1/24";
  lcores = [1];
  payload = { driver = "shm"; path = "$dir/lang-pool"; };
  peers = ( { name = "lang-0"; address = "192.168.77.2"; } );
} );
CFG
cat > "$dir/language.cfg" <<CFG
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
ports = ( {
  name = "p0";
  device = "net_memif0,role=client,socket=$dir/memif.sock,socket-abstract=no";
  address = "192.168.77.2/24";
  lcores = [0];
  payload = { driver = "shm"; path = "$dir/lang-pool"; };
  peers = ( { name = "enc-0"; address = "192.168.77.1"; } );
} );
CFG
