// Package term turns the byte stream of a terminal into shell-integration
// events and plain text. It owns the wire format of tandem's marks, the
// nonce check that decides which marks are trusted, ANSI stripping, and the
// scrollback kept for new viewers. It knows bytes and marks only: nothing of
// PTYs, SSH, sessions or MCP.
//
// # Marks
//
// Every mark is an OSC sequence, ESC ']' ... terminated by BEL (0x07) or
// ST (ESC '\'). Fields are separated by ';'. The last field of a trusted
// mark is "n=" followed by the session nonce (32 lowercase hex digits):
//
//	ESC]133;A;n=NONCE BEL            prompt start
//	ESC]133;B;n=NONCE BEL            input start (prompt drawn)
//	ESC]133;C;n=NONCE BEL            command output start
//	ESC]133;D;EXIT;n=NONCE BEL       command end with exit status
//	ESC]633;E;CMDLINE;n=NONCE BEL    command line (escaped)
//	ESC]633;P;Cwd=PATH;n=NONCE BEL   working directory (escaped)
//	ESC]633;X;NAME[;K=V...];n=NONCE BEL  tandem private mark
//
// Escaped text uses '\\' for a backslash and '\xNN' (two hex digits) for
// ';', control bytes and DEL. A 133 or 633 mark whose nonce is missing or
// wrong is forged: it is removed from the display stream and produces no
// event.
package term
