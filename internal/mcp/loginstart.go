package mcp

import (
	"fmt"
	"time"
)

// slowLogin is how long a shell's start may take before ssh_connect's
// message says where the time went: tandem's own part is tens of
// milliseconds, so the rest is the login's startup files.
const slowLogin = time.Second

// noteLoginStart puts the shell's start time in a connect reply as
// loginStartMs, and, when it was slow, says why in the message: a user's
// rc (pyenv init, nvm, conda) is the usual cause, which tandem cannot
// shorten.
func noteLoginStart(r reply, took time.Duration) {
	if took <= 0 {
		return
	}
	r["loginStartMs"] = took.Milliseconds()
	if took >= slowLogin {
		r["message"] = fmt.Sprintf("%s The shell took %.1f s to start (loginStartMs), almost all of it the login's own startup files (~/.bashrc: pyenv init, nvm, conda and the like; over SSH bash reads it twice, as the login's shell and as tandem's); commands are not slowed by it.",
			r["message"], took.Seconds())
	}
}
