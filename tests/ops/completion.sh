#!/bin/bash
# usage: tests/ops/completion.sh KUPDATE — drives the bash completion as
# bash does (COMP_WORDS, COMP_CWORD, then the function; COMPREPLY read
# back): commands, every option of every `kupdate CMD --help`, preserved
# units from `kupdate list`, cycle IDs (TAP).
set -u
k=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
comp=$here/../../doc/kupdate.bash-completion
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
t=$(mktemp -d /tmp/kupdate-completion-test.XXXXXX)
trap 'rm -rf "$t"' EXIT

# complete LINE: what the completion offers for the last word of LINE (a
# trailing space means a new, empty word)
complete_line() {
	bash --norc --noprofile -c '
		source "$1"
		read -ra COMP_WORDS <<<"$2"
		[[ $2 == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$2 COMP_POINT=${#2}
		_kupdate
		printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$1" | sort | xargs
}
expect() { # LINE EXPECTED
	local got
	got=$(complete_line "$1")
	[ "$got" = "$2" ] && ok "'$1' -> $got" || nok "'$1' -> '$got', expected '$2'"
}

# a kupdate in PATH standing for the real one, except that `list` answers
# in the real format without needing systemd
mkdir -p "$t/bin" "$t/state/cycles/20261203T045532-7d6c" "$t/state/cycles/.20261203T050000-0001.tmp"
cat >"$t/bin/kupdate" <<EOS
#!/bin/sh
if [ "\$1" = list ]; then
	printf '%-32s %-10s %8s %6s  %s\n' UNIT STATE MAINPID PROCS CHECKPOINT
	printf '%-32s %-10s %8d %6u  %s\n' redis-server.service active 120 1 "not checked"
	printf '%-32s %-10s %8d %6u  %s\n' nginx.service active 130 3 "not checked"
	exit 0
fi
exec "$k" "\$@"
EOS
chmod +x "$t/bin/kupdate"
export PATH=$t/bin:$PATH KUPDATE_STATE_DIR=$t/state

expect "kupdate " "apply check disable dump enable help kernel-installed list recover restore show status"
expect "kupdate st" "status"
expect "kupdate -v --log-file /tmp/x.log li" "list"
expect "kupdate --v" "--verbose --version"
expect "kupdate disable " "nginx.service redis-server.service"
expect "kupdate apply /boot/vmlinuz --unit r" "redis-server.service"
expect "kupdate status --cycle " "20261203T045532-7d6c"
expect "kupdate list --" "--ghost-limit --help --json --no-check"
expect "kupdate check --j" "--json"
mkdir -p "$t/imgs/a" "$t/imgs/b"
expect "kupdate show $t/imgs/" "$t/imgs/a $t/imgs/b"

# every option of every command's --help is offered
for cmd in apply status list check recover dump restore show; do
	help=$("$k" "$cmd" --help 2>&1 | grep -oE '(^|[ [|,])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ [|,]//' | sort -u)
	# dump, restore and show print kupdate's whole usage: their own line
	case $cmd in
	recover | dump | restore | show)
		help=$("$k" --help | awk -v c="  $cmd " 'index($0, c) == 1 { p = 1 } p && (/^$/ || (/^  [a-z]/ && index($0, c) != 1)) { p = 0 } p' |
			grep -oE '(^|[ [|,])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ [|,]//' | sort -u)
		;;
	esac
	offered=" $(complete_line "kupdate $cmd -") "
	missing=""
	for o in $help; do
		[[ $offered == *" $o "* ]] || missing="$missing $o"
	done
	[ -z "$missing" ] && ok "$cmd: every option of its help is completed ($(echo $help | wc -w))" ||
		nok "$cmd: options of its help not completed:$missing"
done
echo "1..$n"
exit $failed
