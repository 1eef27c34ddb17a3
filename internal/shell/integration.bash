# tandem shell integration. Sourced by bash as its --rcfile; see rc.go and
# doc.go for the protocol. It must be safe under any user options, so it
# saves and restores -e/-u.
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
# The terminal, open once: the key bindings write their marks to it on
# every Enter and every staged line.
exec {__tandem_tty}>/dev/tty
# On exit: a human's last command line (exit, Ctrl-D) still reports its
# line and status, then the run dir goes if the rc made it.
__tandem_exit() {
	local s=$?
	if [[ ${__tandem_agent-} != 1 && -n ${__tandem_N-} ]]; then
		{
			[[ ${__tandem_ran-} == 1 ]] && __tandem_pc "$s"
			printf '\033]633;X;exit%s' "$__tandem_N"
		} >/dev/tty 2>/dev/null
	fi
	[ -n "${__tandem_own_dir:-}" ] && rm -rf -- "$__tandem_dir"
}
trap __tandem_exit EXIT

# Marks. Variables hold the nonce; PS0/PS1 name them only.
__tandem_A=$'\033]133;A;n='$__tandem_n$'\007'
__tandem_B=$'\033]133;B;n='$__tandem_n$'\007'
__tandem_C=$'\033]133;C;n='$__tandem_n$'\007'
__tandem_N=';n='$__tandem_n$'\007'
# The key of tandem's answers on the "in" FIFO: the nonce's first 12
# characters, as each answer costs bash a read(2) a byte.
__tandem_k=${__tandem_n:0:12}

# Each substitution only runs when its byte is there: on a long line a
# substitution costs time even with nothing to replace.
__tandem_esc() {
	local s=$1
	if [[ $s == *[\\\;$'\n\r\t\033\007\030\032\177']* ]]; then
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
	fi
	__tandem_r=$s
}

__tandem_esc "$__tandem_dir"
printf '\033]633;X;ready;dir=%s;pid=%s%s' "$__tandem_r" "$$" "$__tandem_N"

# The user's own rc file still loads: TANDEM_USER_RC names it where HOME
# is not the user's (a local session's private HOME); empty means none.
if [ "${TANDEM_USER_RC+set}" = set ]; then __tandem_rc=$TANDEM_USER_RC; else __tandem_rc=~/.bashrc; fi
unset TANDEM_USER_RC
[ -n "$__tandem_rc" ] && [ -f "$__tandem_rc" ] && [ -r "$__tandem_rc" ] && . "$__tandem_rc"
unset __tandem_rc
# What tandem judged is what bash runs: no history expansion (a '!' in an
# approved line stays a '!'), and '#' always starts a comment. Both are put
# back before every prompt (__tandem_opts_fix).
set +H
shopt -s interactive_comments
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
# C comes after the user's own PS0, so that for an agent command everything
# before it on the captured stderr is the terminal's echo, not output.
PS0="${PS0-}"'${__tandem_null[__tandem_ran=1]-}${__tandem_C}'
__tandem_hist=0
__tandem_hinit=0
__tandem_typed=0
__tandem_agent=0
__tandem_pcs=0
__tandem_pair=0
__tandem_asked=0
__tandem_id=
__tandem_bg=

# Agent commands. tandem presses the stage key; this function asks for the
# command ("want"), reads "ID LEN\n" and LEN bytes from the "in" FIFO, puts
# them on the line, points fds 1 and 2 at the relay FIFOs and says "staged".
# tandem then presses the accept key. Everything the line writes to fds 1
# and 2, whatever its shape, is captured; readline's redraw of the line goes
# to the stderr FIFO before the C mark. A human's half-typed line is never
# overwritten. LEN 0 means tandem no longer wants a line.
__tandem_stage() {
	local LC_ALL=C hdr id len cmd pair fo fe
	printf '\033]633;X;want%s' "$__tandem_N" >&$__tandem_tty
	# A drain answer that came after its wait ran out is skipped.
	while IFS= read -r -t 5 -u "$__tandem_fi" hdr && [[ $hdr == "$__tandem_k "* ]]; do :; done
	if [[ -z $hdr || $hdr == "$__tandem_k "* ]]; then
		printf '\033]633;X;stagefail%s' "$__tandem_N" >/dev/tty
		return
	fi
	# "ID LEN" or "ID LEN PAIR": PAIR asks for fresh output FIFOs, as a
	# background job still holds the ones the last command had.
	id=${hdr%% *}
	len=${hdr#* }
	pair=
	if [[ $len == *" "* ]]; then
		pair=${len#* }
		len=${len%% *}
	fi
	[[ $len == 0 ]] && return
	if [[ ! $len =~ ^[0-9]+$ ]] || ! IFS= read -r -d '' -N "$len" -t 30 -u "$__tandem_fi" cmd || [[ ${#cmd} != "$len" ]]; then
		printf '\033]633;X;stagefail%s' "$__tandem_N" >/dev/tty
		return
	fi
	if [[ -n $READLINE_LINE ]]; then
		__tandem_esc "$READLINE_LINE"
		printf '\033]633;X;busy;id=%s;line=%s%s' "$id" "$__tandem_r" "$__tandem_N" >/dev/tty
		return
	fi
	if [[ $pair =~ ^[0-9]+$ ]] && mkfifo -m 600 "$__tandem_dir/out.$pair" "$__tandem_dir/err.$pair" 2>/dev/null &&
		exec {fo}<>"$__tandem_dir/out.$pair" {fe}<>"$__tandem_dir/err.$pair"; then
		# The old pair is left to the background job: once it ends,
		# tandem reads its end there.
		exec {__tandem_fo}>&- {__tandem_fe}>&-
		__tandem_fo=$fo __tandem_fe=$fe __tandem_pair=$pair
	fi
	READLINE_LINE=$cmd
	READLINE_POINT=${#cmd}
	__tandem_agent=1
	__tandem_id=$id
	__tandem_bg=${!-}
	printf '\033]633;X;staged;id=%s;pair=%s%s' "$id" "$__tandem_pair" "$__tandem_N" >&$__tandem_tty
	exec {__tandem_so}>&1 {__tandem_se}>&2 1>&$__tandem_fo 2>&$__tandem_fe
	printf '\033]633;X;bom;id=%s%s' "$id" "$__tandem_N"
	printf '\033]633;X;bom;id=%s%s' "$id" "$__tandem_N" >&2
}
# Ends the capture of an agent line: end-of-output marks carrying the
# status ($1, "-" if unknown), whether the line ran at all ($2) and the
# cwd, then fds back. The agent's result comes from here, not the tty.
__tandem_release() {
	local bg=0
	# The line started a background job ($! moved), which may write to
	# these FIFOs after the line ends: the next line gets new ones.
	[[ ${!-} != "$__tandem_bg" ]] && bg=1
	__tandem_esc "$PWD"
	local m=$'\033]633;X;eom;status='$1';ran='$2';bg='$bg';fixed='${__tandem_fixed#,}';cwd='$__tandem_r$__tandem_N
	printf %s "$m" >&$__tandem_fo
	printf %s "$m" >&$__tandem_fe
	exec 1>&$__tandem_so 2>&$__tandem_se {__tandem_so}>&- {__tandem_se}>&-
}
# After an agent line, before bash reads its next one, what the agent typed
# and its command did not read must never reach the prompt. The line's end
# mark (eom), or the request the hook sends with its P mark (X;drain),
# makes tandem take no more keys for the line and answer on the "in" FIFO,
# never the terminal (that would take the human's keys): "KEY ID k" (ID
# is the line's id's last 8 characters) when nothing of the agent's is
# unread, or tandem emptied the queue itself. The hook most often finds the answer there already; this waits
# for it otherwise (read -t costs about 1.5 us a byte, so it waits for one
# byte, and a plain read takes the rest). On "KEY ID d TOKEN" empty the terminal's
# queue, which then holds only the agent's keys, up to the RS TOKEN US that
# tandem types behind them, and say "drained" so tandem sends the human's
# keys it held. Anything else, or nothing within 2 s: empty it until it
# stays empty for 30 ms. read -d and -N put the terminal in non-canonical
# mode, so a half-typed line goes too.
__tandem_drainwait() {
	local a=$1 c junk
	while [[ $a != "$__tandem_k ${__tandem_id: -8} "* ]]; do
		a=
		# Wait for the first byte only: the rest of the line, written
		# whole, is there with it.
		if ! { read -t 0 -u "$__tandem_fi" && IFS= read -r -u "$__tandem_fi" a; }; then
			IFS= read -r -d '' -N 1 -t 2 -u "$__tandem_fi" c || break
			IFS= read -r -u "$__tandem_fi" a
			a=$c$a
		fi
	done
	[[ $a == "$__tandem_k ${__tandem_id: -8} k" ]] && return
	__tandem_dr=1
	local tok= buf= found=0
	[[ $a == "$__tandem_k ${__tandem_id: -8} d "* ]] && tok=${a##* }
	if [[ -n $tok ]]; then
		# tandem types RS TOKEN US behind the agent's keys: read up to it.
		while IFS= read -r -s -d $'\037' -t 2 junk; do
			(( ${#buf} > 40 )) && buf=${buf: -40}
			buf+=$junk
			if [[ $buf == *$'\036'"$tok" ]]; then
				found=1
				break
			fi
			buf+=$'\037'
		done
	fi
	if [[ $found == 0 ]]; then
		while IFS= read -r -s -d '' -N 4096 -t 0.03 junk || [[ -n $junk ]]; do :; done
	fi
	printf '\033]633;X;drained%s' "$__tandem_N" >&$__tandem_tty
}
# tandem no longer wants a staged line (it gave up waiting): clear it.
__tandem_unstage() {
	if [[ $__tandem_agent == 1 ]]; then
		__tandem_release - 0
	fi
	READLINE_LINE=
	READLINE_POINT=0
	__tandem_agent=0
}
# The end of every command line: E (command line), D (status), P (cwd).
# It is the first element of PROMPT_COMMAND and, as __tandem_tail, the last:
# a user who assigns PROMPT_COMMAND a string replaces element 0 only.
__tandem_pc() {
	local s=$? h
	[[ -n ${1-} ]] && s=$1
	(( __tandem_pcs )) && return $s
	__tandem_pcs=1
	__tandem_opts_fix
	if [[ $__tandem_hinit == 0 ]]; then
		# Before the first prompt, once bash has loaded the history file:
		# the number the first command's is compared with.
		__tandem_hinit=1
		HISTTIMEFORMAT= builtin history 1 >"$__tandem_dir/h"
		IFS= read -r h <"$__tandem_dir/h"
		h=${h#"${h%%[! ]*}"}
		h=${h%%[!0-9]*}
		__tandem_hist=${h:-0}
	fi
	if [[ $__tandem_agent == 1 ]]; then
		__tandem_release "$s" "$__tandem_ran"
		__tandem_asked=1
	fi
	if [[ $__tandem_ran == 1 ]]; then
		local HISTTIMEFORMAT= num=
		__tandem_r=
		# The newest history entry's number, free: HISTCMD less one, when
		# bash runs this as PROMPT_COMMAND (no argument, or "pc").
		if [[ ( -z ${1-} || ${2-} == pc ) && ${HISTCMD-} =~ ^[0-9]+$ ]]; then
			num=$((HISTCMD - 1))
		fi
		# A human's line that its line mark did not name (Enter rebound,
		# history expansion), or a number not known yet: history 1 into a
		# file and back, no fork. An agent line can be a megabyte: tandem
		# knows it already, so only its number is read.
		if [[ -z $num ]] || [[ $__tandem_agent != 1 && $__tandem_typed != 1 ]]; then
			builtin history 1 >"$__tandem_dir/h"
			if [[ $__tandem_agent == 1 ]]; then
				IFS= read -r h <"$__tandem_dir/h"
			else
				IFS= read -r -d '' h <"$__tandem_dir/h"
			fi
			h=${h#"${h%%[! ]*}"}
			num=${h%%[!0-9]*}
			if [[ $__tandem_agent != 1 && $__tandem_typed != 1 && -n $num && $num != "$__tandem_hist" ]]; then
				if (( num - __tandem_hist > 1 )); then
					# A multi-line buffer (a paste) ran as several entries:
					# send them all, each marked by HISTTIMEFORMAT's RS byte,
					# for tandem to split (X;hist); E names the last.
					HISTTIMEFORMAT=$'\036' builtin history $(( num - __tandem_hist > 10000 ? 10000 : num - __tandem_hist )) >"$__tandem_dir/h"
					IFS= read -r -d '' __tandem_r <"$__tandem_dir/h"
					__tandem_esc "$__tandem_r"
					printf '\033]633;X;hist;text=%s%s' "$__tandem_r" "$__tandem_N"
				fi
				h=${h#"$num"}
				h=${h#\*}
				h=${h#"  "}
				__tandem_esc "${h%$'\n'}"
			fi
		fi
		__tandem_hist=${num:-$__tandem_hist}
		printf '\033]633;E;%s%s\033]133;D;%s%s' "$__tandem_r" "$__tandem_N" "$s" "$__tandem_N"
	fi
	__tandem_ran=0
	__tandem_agent=0
	__tandem_typed=0
	[[ -n $__tandem_fixed ]] && printf '\033]633;X;healed;what=%s%s' "${__tandem_fixed#,}" "$__tandem_N"
	[[ $__tandem_noedit == 1 ]] && printf '\033]633;X;noedit;mode=%s%s' "$__tandem_mode" "$__tandem_N"
	__tandem_fixed= __tandem_noedit=0
	__tandem_esc "$PWD"
	if [[ $__tandem_asked == 1 ]]; then
		__tandem_asked=0 __tandem_dr=0 __tandem_a=
		printf '\033]633;P;Cwd=%s%s\033]633;X;drain;id=%s%s' "$__tandem_r" "$__tandem_N" "$__tandem_id" "$__tandem_N"
		read -t 0 -u "$__tandem_fi" && IFS= read -r -u "$__tandem_fi" __tandem_a
		[[ $__tandem_a == "$__tandem_k ${__tandem_id: -8} k" ]] || __tandem_drainwait "$__tandem_a"
	else
		printf '\033]633;P;Cwd=%s%s' "$__tandem_r" "$__tandem_N"
	fi
	return $s
}
__tandem_tail() {
	local s=$?
	if [[ ${PROMPT_COMMAND[0]} != __tandem_pc ]]; then
		# A command replaced the hook, the first element: end its line
		# here, and put the hook back.
		__tandem_fixed+=,prompt_command
		__tandem_pc "$s" pc
		PROMPT_COMMAND=(__tandem_pc "${PROMPT_COMMAND[@]}")
	fi
	__tandem_pcs=0
	__tandem_ps1
	return $s
}

# Puts tandem's hook first and last in PROMPT_COMMAND, keeping every
# element of the user's, whatever a command or the user's rc made of it.
__tandem_hook() {
	local e pc=()
	if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
		for e in "${PROMPT_COMMAND[@]}"; do
			[[ $e == __tandem_pc || $e == __tandem_tail ]] || pc+=("$e")
		done
	elif [[ -n ${PROMPT_COMMAND-} ]]; then
		pc=("$PROMPT_COMMAND")
	fi
	PROMPT_COMMAND=(__tandem_pc "${pc[@]}" __tandem_tail)
}
__tandem_hook

# The shell options the integration needs, and those that keep what bash
# runs what tandem judged, put back if a command changed them; what was put back is reported with the next P mark's cwd (X;fix).
__tandem_mode=emacs
[[ -o vi ]] && __tandem_mode=vi
__tandem_fixed=
__tandem_noedit=0
__tandem_opts_fix() {
	[[ -o history ]] || { set -o history; __tandem_fixed+=,history; }
	if [[ -o vi ]]; then
		__tandem_mode=vi
	elif [[ ! -o emacs ]]; then
		# Line editing is off. Turned back on here, bash would read on
		# without any prompt; tandem types `set -o MODE` at the prompt
		# bash draws itself instead (X;noedit).
		__tandem_fixed+=,$__tandem_mode
		__tandem_noedit=1
	fi
	[[ -o monitor ]] || { set -o monitor; __tandem_fixed+=,monitor; }
	[[ -o histexpand ]] && { set +H; __tandem_fixed+=,histexpand; }
	shopt -q interactive_comments || { shopt -s interactive_comments; __tandem_fixed+=,interactive_comments; }
}

# Repairs the integration when a prompt came without the hook's marks (a
# command unset or replaced PROMPT_COMMAND): tandem presses the heal key,
# and this ends the command as the hook would have ($? is still its
# status), puts the hook back and says so (X;healed).
__tandem_heal() {
	local s=$?
	__tandem_fixed+=,prompt_command
	__tandem_pcs=0
	__tandem_dr=0
	__tandem_pc "$s"
	# Keys of the agent's that the line editor took before this key:
	# never a line of the human's.
	[[ $__tandem_dr == 1 ]] && READLINE_LINE= READLINE_POINT=0
	__tandem_hook
	__tandem_ps1
	__tandem_pcs=0
	return $s
}

# The human's line, as readline accepts it (Enter runs this, then
# accept-line): tandem names a human command while it runs, before its E
# mark comes at the end.
__tandem_line() {
	# The mark names the line, so the end needs no history read; unless
	# history expansion will change it (a '!').
	__tandem_typed=1
	[[ $- == *H* && $READLINE_LINE == *!* ]] && __tandem_typed=0
	__tandem_esc "$READLINE_LINE"
	printf '\033]633;X;line;text=%s%s' "$__tandem_r" "$__tandem_N" >&$__tandem_tty
}

for __tandem_m in emacs vi-insert vi-command; do
	bind -m "$__tandem_m" -x '"\e[9001~": __tandem_stage'
	bind -m "$__tandem_m" '"\e[9002~": accept-line'
	bind -m "$__tandem_m" -x '"\e[9003~": __tandem_unstage'
	bind -m "$__tandem_m" -x '"\e[9004~": __tandem_line'
	bind -m "$__tandem_m" -x '"\e[9005~": __tandem_heal'
	bind -m "$__tandem_m" '"\C-m": "\e[9004~\e[9002~"'
	bind -m "$__tandem_m" '"\C-j": "\e[9004~\e[9002~"'
done
unset __tandem_m

[[ $__tandem_opts2 == *e* ]] && set -e
[[ $__tandem_opts2 == *u* ]] && set -u
unset __tandem_opts __tandem_opts2
