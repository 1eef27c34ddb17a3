package sshconn

import "time"

// keepaliveRequest is the global request OpenSSH's client sends for
// ServerAliveInterval; servers answer it (usually with a failure reply),
// which is all that matters.
const keepaliveRequest = "keepalive@openssh.com"

// keepalive sends a request every interval and ends the conn when max
// intervals in a row pass without a reply. A dead link is therefore found
// at most (max+1)*interval after its last sign of life. At most one
// request is outstanding: a late reply still counts as one.
func (c *conn) keepalive(interval time.Duration, max int) {
	defer c.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		reply := make(chan error, 1)
		c.wg.Add(1) // safe: this goroutine is counted, so wg is not zero
		go func() {
			defer c.wg.Done()
			_, _, err := c.client.SendRequest(keepaliveRequest, true, nil)
			reply <- err
		}()
		if !c.awaitReply(reply, tick.C, interval, max) {
			return
		}
	}
}

// awaitReply waits for one keepalive reply, counting ticks; false means
// the conn is ending.
func (c *conn) awaitReply(reply <-chan error, tick <-chan time.Time, interval time.Duration, max int) bool {
	for missed := 0; ; {
		select {
		case <-c.done:
			return false
		case err := <-reply:
			return err == nil // else the transport is gone; watch says why
		case <-tick:
			if missed++; missed >= max {
				c.end(c.lost("no keepalive reply from %s for %v", c.addr, time.Duration(max)*interval))
				return false
			}
		}
	}
}
