#!/usr/bin/env bash
# Static checks of the tree; exits non-zero on any finding, printing each as
# "file:line: tool rule: message" and a count per tool on the last line.
#
#   devtools/check.sh [format|shell|cppcheck|python|subjects]...
#
# With no argument every check runs:
#  format    clang-format (.clang-format) on the C lines changed since BASE.
#            The tree predates the format rules and is deliberately not
#            reformatted as a whole (that would touch every file at once);
#            as DPDK's checkpatches does for patches, only what changes is
#            held to the rules. BASE is $EGW_CHECK_BASE or else the commit
#            recorded in devtools/check-base, from which on changes are held
#            to the rules: the one that introduced .clang-format, moved on
#            only where work written before the rules is merged (should
#            that commit be unknown, e.g. in a rewritten history, the commit
#            that added .clang-format is looked up instead). Uncommitted
#            changes are checked as well; `git clang-format BASE` formats
#            the changed lines.
#  shell     shellcheck on every shell script (*.sh and any tracked file
#            whose first line is a sh/bash shebang).
#  cppcheck  cppcheck on the C sources; justified false positives are in
#            devtools/cppcheck.supp, each with its reason.
#  python    ruff, or where Debian has none (Debian 12) flake8 with the
#            rules ruff checks by default (E4, E7, E9, F), on every tracked
#            Python file (python/, tests/, examples/, dist/).
#  subjects  commit subjects since BASE: at most 72 characters, an
#            "area: what" prefix, no trailing full stop (after DPDK's
#            devtools/check-git-log.sh).
# scripts/deps.sh installs the tools; a missing tool is a finding too.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

declare -A found=()
note() { # tool, count
	found[$1]=$2
}
need() { # command, tool
	command -v "$1" >/dev/null 2>&1 && return 0
	echo "check: $1 is not installed (scripts/deps.sh installs it)"
	note "$2" 1
	return 1
}

base_commit() {
	local b=${EGW_CHECK_BASE:-$(cat devtools/check-base 2>/dev/null)}

	if [ -n "$b" ] && git cat-file -e "$b^{commit}" 2>/dev/null; then
		echo "$b"
		return
	fi
	git log --diff-filter=A --format=%H -- .clang-format | tail -1
}

check_format() {
	need git-clang-format format || return
	local out
	out=$(git clang-format --diff --extensions c,h "$BASE" -- 2>&1 |
		awk -v base="${BASE:0:12}" '
		/^\+\+\+ b\// { f = substr($0, 7) }
		/^@@ / { split($2, a, ","); l = substr(a[1], 2)
			printf "%s:%d: clang-format: lines differ from .clang-format (git clang-format %s)\n", f, l, base }')
	[ -z "$out" ] || echo "$out"
	note format "$(grep -c . <<<"$out")"
}

shell_scripts() {
	git ls-files -z | while IFS= read -r -d '' f; do
		[ -f "$f" ] || continue
		case $f in
		*.sh) echo "$f" ;;
		*) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba)?sh( |$)' && echo "$f" ;;
		esac
	done
}

check_shell() {
	need shellcheck shell || return
	local out
	# -x -P SCRIPTDIR: follow the scripts' sources (tests/vm/common.sh).
	# SC2015: "a && b || fail" is this tree's idiom for "fail unless both
	#   hold" - the || branch must run when either fails, as it does.
	# SC2317: shellcheck 0.9 calls the body of a function reached only
	#   through a trap unreachable.
	mapfile -t scripts < <(shell_scripts)
	out=$(shellcheck -x -P SCRIPTDIR -e SC2015,SC2317 -f gcc "${scripts[@]}" 2>&1)
	[ -z "$out" ] || sed -E 's/^([^:]+:[0-9]+):[0-9]+: [a-z]+: (.*) \[(SC[0-9]+)\]$/\1: shellcheck \3: \2/' <<<"$out"
	note shell "$(grep -c . <<<"$out")"
}

check_cppcheck() {
	need cppcheck cppcheck || return
	local out incs
	mapfile -t incs < <(git ls-files '*.h' | xargs -n1 dirname | sort -u | sed 's/^/-I/')
	mapfile -t srcs < <(git ls-files '*.c')
	out=$(cppcheck -q -j2 --std=c11 --max-configs=1 --inline-suppr \
		--enable=warning,portability,performance \
		--suppressions-list=devtools/cppcheck.supp \
		--template='{file}:{line}: cppcheck {id}: {message}' \
		"${incs[@]}" "${srcs[@]}" 2>&1)
	[ -z "$out" ] || echo "$out"
	note cppcheck "$(grep -c ': cppcheck ' <<<"$out")"
}

check_python() {
	local out
	mapfile -t py < <(git ls-files '*.py')
	if command -v ruff >/dev/null 2>&1; then
		out=$(ruff check --quiet --output-format=concise "${py[@]}" 2>&1 |
			sed -E 's/^([^:]+:[0-9]+):[0-9]+: ([A-Z]+[0-9]+) /\1: ruff \2: /')
	else
		need flake8 python || return
		out=$(flake8 --select=E4,E7,E9,F \
			--format='%(path)s:%(row)d: flake8 %(code)s: %(text)s' \
			"${py[@]}" 2>&1)
	fi
	[ -z "$out" ] || echo "$out"
	note python "$(grep -c . <<<"$out")"
}

check_subjects() {
	local n=0 h s
	while IFS=' ' read -r h s; do
		if [ ${#s} -gt 72 ]; then
			echo "commit $h: subjects: ${#s} characters, at most 72: $s"
			n=$((n + 1))
		fi
		if ! grep -qE '^[^ :][^:]*: [^ ]' <<<"$s"; then
			echo "commit $h: subjects: no 'area: what' prefix: $s"
			n=$((n + 1))
		fi
		if [[ $s == *. ]]; then
			echo "commit $h: subjects: ends with a full stop: $s"
			n=$((n + 1))
		fi
	done < <(git log --no-merges --format='%h %s' "$BASE..HEAD")
	note subjects $n
}

BASE=$(base_commit)
[ -n "$BASE" ] || { echo "check: no base commit (devtools/check-base)"; exit 2; }
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(format shell cppcheck python subjects)
for c in "${checks[@]}"; do
	case $c in
	format|shell|cppcheck|python|subjects) "check_$c" ;;
	*) echo "check: unknown check '$c' (format, shell, cppcheck, python, subjects)"; exit 2 ;;
	esac
done
total=0
summary=""
for c in "${checks[@]}"; do
	summary+=" $c ${found[$c]:-0},"
	total=$((total + ${found[$c]:-0}))
done
echo "check:${summary%,} (base ${BASE:0:12})"
[ "$total" -eq 0 ]
