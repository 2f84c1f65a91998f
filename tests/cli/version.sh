#!/usr/bin/env bash
# embgw --version and embgw-gen --version: exit 0 and print every field
# (doc/gateway.md, "Version"), each with the value the build and the
# headers give: the project's version, git describe (or "unknown"), the
# DPDK version, the rdma-core build, the wire protocol's and the attach
# ABI's versions.
# usage: version.sh SRCDIR PROJECT_VERSION RDMA_CORE PROGRAM...
set -u
src=$1 version=$2 rdma=$3
shift 3
fail=0
proto=$(sed -n 's/^#define EGW_PROTO_VERSION \([0-9]*\)u.*/\1/p' "$src/lib/proto/egw_proto.h")
abi=$(sed -n 's/^#define EGW_ATTACH_VERSION \([0-9]*\)u.*/\1/p' "$src/lib/attach/egw_attach.h")
[ -n "$proto" ] && [ -n "$abi" ] || { echo "FAIL: no version defines in the headers"; exit 1; }
dpdk="none (built without DPDK)"
pkg-config --exists libdpdk 2>/dev/null && dpdk="DPDK $(pkg-config --modversion libdpdk)"

for prog in "$@"; do
	name=$(basename "$prog")
	out=$("$prog" --version 2>&1); rc=$?
	[ $rc -eq 0 ] || { echo "FAIL: $name --version: exit $rc: $out"; fail=1; }
	want() { # KEY VALUE: the line "KEY: VALUE" is there
		grep -qxF "$1: $2" <<<"$out" ||
			{ echo "FAIL: $name --version: no line '$1: $2' in:"; echo "$out"; fail=1; }
	}
	[ "$(head -1 <<<"$out")" = "$name $version" ] ||
		{ echo "FAIL: $name --version: first line '$(head -1 <<<"$out")', not '$name $version'"; fail=1; }
	grep -qE '^git: ([0-9a-zA-Z._+-]+|unknown)$' <<<"$out" ||
		{ echo "FAIL: $name --version: no git: line: $out"; fail=1; }
	# a build without DPDK says so instead of a version; with it,
	# rte_version() of the library it runs on
	if [ "$name" = embgw ] && ! "$prog" --help 2>&1 | grep -q "EAL args"; then
		want dpdk "none (built without DPDK)"
	else
		want dpdk "$dpdk"
	fi
	want rdma-core "$rdma"
	want protocol "$proto"
	want attach-abi "$abi"
	[ "$(wc -l <<<"$out")" -eq 6 ] || { echo "FAIL: $name --version: not 6 lines: $out"; fail=1; }
	# -V is the same
	[ "$("$prog" -V 2>&1)" = "$out" ] || { echo "FAIL: $name -V differs from --version"; fail=1; }
done
[ $fail -eq 0 ] && echo "version: $# program(s) print every field"
exit $fail
