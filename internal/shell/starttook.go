package shell

import "time"

// StartTook is how long the shell took from the moment the backend
// started it to its first prompt with the relay connected: the login's
// own start (over SSH, bash reads ~/.bashrc once as the login's shell and
// again as tandem's interactive shell) and tandem's integration. A login
// whose rc runs pyenv init or nvm is seen here, so ssh_connect can say
// where its time went.
func (s *Shell) StartTook() time.Duration { return s.startTook }
