#!/bin/bash
# usage: tests/ops/man.sh KUPDATE — the man pages: they render without a
# warning (groff -ww, man --warnings), and every command and option of
# every --help is in kupdate(8), written as an option (\- in the source,
# so "--json" in the rendered text), so that the two cannot drift (TAP).
set -u
k=$1
here=$(cd "$(dirname "$0")" && pwd)
man=${MANDIR_BUILD:-$here/../../build/man}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }

for p in kupdate.8 kupdate.target.7 kupdate-images.5; do
	f=$man/$p
	if [ ! -s "$f" ]; then
		nok "$p was not generated (make man)"
		continue
	fi
	w=$(groff -ww -z -t -man "$f" 2>&1)
	[ -z "$w" ] && ok "$p: groff -ww is silent" || nok "$p: groff -ww: $w"
	w=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$f" 2>&1 >/dev/null)
	[ -z "$w" ] && ok "$p: man --warnings -l is silent" || nok "$p: man: $w"
	grep -q '@[A-Z]*@' "$f" && nok "$p: a placeholder is left" || ok "$p: no placeholder left"
done
command -v mandoc >/dev/null && for p in kupdate.8 kupdate.target.7 kupdate-images.5; do
	w=$(mandoc -T lint -W warning "$man/$p" 2>&1)
	[ -z "$w" ] && ok "$p: mandoc -T lint" || nok "$p: mandoc: $w"
done

# in the rendered text, and in the source written with "\-" (a plain "-"
# is a hyphen, which some renderings turn into U+2010: not typable)
src=$(cat "$man/kupdate.8")
text=$(MANWIDTH=200 LC_ALL=C.UTF-8 man -l "$man/kupdate.8" 2>/dev/null | col -b)
opts_of() { grep -oE '(^|[ [|,(])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ [|,(]//' | sort -u; }
cmds=$("$k" --help | awk '/^  [a-z][a-z-]* /{ print $1 }' | sort -u)
for c in $cmds; do
	grep -qE "kupdate $c( |$)" <<<"$text" && ok "command $c is in kupdate(8)" || nok "command $c is not in kupdate(8)"
done
for c in "" apply status enable disable list check restore-unit netlock finish; do
	# shellcheck disable=SC2086
	help=$("$k" $c --help 2>&1)
	missing=""
	for o in $(opts_of <<<"$help"); do
		grep -qE -- "(^|[^a-zA-Z-])$o([^a-zA-Z-]|$)" <<<"$text" || missing="$missing $o"
		grep -qF -- "${o//-/\\-}" <<<"$src" || missing="$missing $o(unescaped)"
	done
	[ -z "$missing" ] && ok "kupdate ${c:-(global)} --help: every option is in kupdate(8)" ||
		nok "kupdate ${c:-(global)} --help: not in kupdate(8):$missing"
done
echo "1..$n"
exit $failed
