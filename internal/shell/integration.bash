# tandem shell integration. Sourced by bash as its --rcfile; see rc.go.
# It must be safe under any user options, so it saves and restores -e/-u.
__tandem_opts=$-
set +eu
# Handshake: ask tandem for the session nonce over the tty, echo off, so the
# nonce never sits in the environment, argv or a file.
__tandem_stty=$(stty -g 2>/dev/null)
stty -echo 2>/dev/null
printf '\033]633;X;hello\007'
IFS= read -r __tandem_n
[ -n "$__tandem_stty" ] && stty "$__tandem_stty" 2>/dev/null
unset __tandem_stty
__tandem_n=${__tandem_n%$'\r'}

# Run dir with the relay FIFOs. The shell holds all three open read-write, so
# tandem's readers never see EOF and writers never block on open.
__tandem_dir=${TANDEM_RUNDIR:-}
unset TANDEM_RUNDIR
if [ -z "$__tandem_dir" ]; then
	__tandem_dir=$(mktemp -d "${TMPDIR:-/tmp}/tandem.XXXXXXXX")
	__tandem_own_dir=1
fi
mkfifo -m 600 "$__tandem_dir/in" "$__tandem_dir/out" "$__tandem_dir/err"
exec {__tandem_fi}<>"$__tandem_dir/in" {__tandem_fo}<>"$__tandem_dir/out" {__tandem_fe}<>"$__tandem_dir/err"
trap '[ -n "${__tandem_own_dir:-}" ] && rm -rf -- "$__tandem_dir"' EXIT

# Marks. Variables hold the nonce; PS0/PS1 name them only.
__tandem_A=$'\033]133;A;n='$__tandem_n$'\007'
__tandem_B=$'\033]133;B;n='$__tandem_n$'\007'
__tandem_C=$'\033]133;C;n='$__tandem_n$'\007'
__tandem_N=';n='$__tandem_n$'\007'
__tandem_BOM=$'\033]633;X;bom'$__tandem_N
__tandem_EOM=$'\033]633;X;eom'$__tandem_N

__tandem_esc() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//;/\\x3b}
	s=${s//$'\n'/\\x0a}
	s=${s//$'\r'/\\x0d}
	s=${s//$'\t'/\\x09}
	s=${s//$'\033'/\\x1b}
	s=${s//$'\007'/\\x07}
	s=${s//$'\030'/\\x18}
	s=${s//$'\032'/\\x1a}
	s=${s//$'\177'/\\x7f}
	__tandem_r=$s
}

__tandem_esc "$__tandem_dir"
printf '\033]633;X;ready;dir=%s;pid=%s%s' "$__tandem_r" "$$" "$__tandem_N"

# The user's own rc files still load.
[ -f ~/.bashrc ] && [ -r ~/.bashrc ] && . ~/.bashrc
__tandem_opts2=$-
set +eu

__tandem_ps1() {
	if [[ $PS1 != '\[${__tandem_A}\]'* ]]; then
		PS1='\[${__tandem_A}\]'"$PS1"'\[${__tandem_B}\]'
	fi
}
__tandem_ps1
PS2='\[${__tandem_X2}\]'"${PS2-> }"
__tandem_X2=$'\033]633;X;ps2'$__tandem_N
__tandem_null=()
__tandem_ran=0
PS0='${__tandem_null[__tandem_ran=1]-}${__tandem_C}'"${PS0-}"
__tandem_hist=0
__tandem_agent=0

# Agent commands: tandem writes the command, NUL-terminated, to the "in" FIFO
# and presses the stage key. The staged line is what the human sees and what
# history keeps. A human's half-typed line is never overwritten.
__tandem_stage() {
	local rec id cmd
	if ! IFS= read -r -d '' -t 5 -u "$__tandem_fi" rec; then
		printf '\033]633;X;stagefail%s' "$__tandem_N" >/dev/tty
		return
	fi
	# The record is "ID\nCOMMAND": the ID lets tandem refuse a stale line.
	id=${rec%%$'\n'*}
	cmd=${rec#*$'\n'}
	if [[ -n $READLINE_LINE ]]; then
		__tandem_esc "$READLINE_LINE"
		printf '\033]633;X;busy;id=%s;line=%s%s' "$id" "$__tandem_r" "$__tandem_N" >/dev/tty
		return
	fi
	READLINE_LINE=$cmd
	READLINE_POINT=${#cmd}
	__tandem_agent=1
	printf '\033]633;X;staged;id=%s%s' "$id" "$__tandem_N" >/dev/tty
	trap "$__tandem_trap" DEBUG
}
# tandem no longer wants a staged line (it gave up waiting): clear it.
__tandem_unstage() {
	READLINE_LINE=
	READLINE_POINT=0
	__tandem_agent=0
	trap - DEBUG
	${__tandem_user_debug:+eval "$__tandem_user_debug"}
}
__tandem_pc() {
	local s=$? h
	if [[ $__tandem_agent == 2 ]]; then
		printf %s "$__tandem_EOM" >&$__tandem_fo
		printf %s "$__tandem_EOM" >&$__tandem_fe
		exec 1>&$__tandem_so 2>&$__tandem_se {__tandem_so}>&- {__tandem_se}>&-
	elif [[ $__tandem_agent == 1 ]]; then
		trap - DEBUG
		${__tandem_user_debug:+eval "$__tandem_user_debug"}
		printf '\033]633;X;skipped;status=%s%s' "$s" "$__tandem_N"
	fi
	if [[ $__tandem_ran == 1 ]]; then
		# history 1 into a file and back: no fork for the command line.
		local HISTTIMEFORMAT= num
		builtin history 1 >"$__tandem_dir/h"
		IFS= read -r -d '' h <"$__tandem_dir/h"
		h=${h#"${h%%[! ]*}"}
		num=${h%%[!0-9]*}
		if [[ -n $num && $num != "$__tandem_hist" ]]; then
			__tandem_hist=$num
			h=${h#"$num"}
			h=${h#\*}
			h=${h#"  "}
			__tandem_esc "${h%$'\n'}"
		else
			__tandem_r=
		fi
		printf '\033]633;E;%s%s\033]133;D;%s%s' "$__tandem_r" "$__tandem_N" "$s" "$__tandem_N"
	fi
	__tandem_ran=0
	__tandem_agent=0
	__tandem_esc "$PWD"
	printf '\033]633;P;Cwd=%s%s' "$__tandem_r" "$__tandem_N"
	return $s
}

# One-shot: the first simple command of the agent's line (PS0 has run, so it
# is not PROMPT_COMMAND) sends fds 1 and 2 to the relay; then the user's own
# DEBUG trap, if any, comes back.
__tandem_user_debug=$(trap -p DEBUG)
__tandem_trap='if [[ $__tandem_agent == 1 && $__tandem_ran == 1 ]]; then __tandem_agent=2; exec {__tandem_so}>&1 {__tandem_se}>&2 1>&$__tandem_fo 2>&$__tandem_fe; printf %s "$__tandem_BOM"; printf %s "$__tandem_BOM" >&2; '"${__tandem_user_debug:-trap - DEBUG}"'; fi'

if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
	PROMPT_COMMAND=(__tandem_pc "${PROMPT_COMMAND[@]}" __tandem_ps1)
else
	PROMPT_COMMAND=(__tandem_pc ${PROMPT_COMMAND:+"$PROMPT_COMMAND"} __tandem_ps1)
fi

for __tandem_m in emacs vi-insert; do
	bind -m "$__tandem_m" -x '"\e[9001~": __tandem_stage'
	bind -m "$__tandem_m" '"\e[9002~": accept-line'
	bind -m "$__tandem_m" -x '"\e[9003~": __tandem_unstage'
done
unset __tandem_m

[[ $__tandem_opts2 == *e* ]] && set -e
[[ $__tandem_opts2 == *u* ]] && set -u
unset __tandem_opts __tandem_opts2
