package sshconn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// authMethods builds the credentials of one dial in OpenSSH's order:
// public keys (given keys first, then the agent's), keyboard-interactive,
// password. release closes the agent connection after the handshake.
func (o *Options) authMethods(ctx context.Context) (methods []ssh.AuthMethod, release func(), err error) {
	release = func() {}
	var signers []ssh.Signer
	if len(o.PrivateKey) > 0 {
		s, err := parseKey(o.PrivateKey, o.Passphrase, "PrivateKey")
		if err != nil {
			return nil, release, err
		}
		signers = append(signers, s)
	}
	if o.KeyFile != "" {
		pem, err := os.ReadFile(o.KeyFile)
		if err != nil {
			return nil, release, fmt.Errorf("%w: %w", ErrKey, err)
		}
		s, err := parseKey(pem, o.Passphrase, "key file "+o.KeyFile)
		if err != nil {
			return nil, release, err
		}
		signers = append(signers, s)
	}
	var ag agent.ExtendedAgent
	if o.UseAgent {
		if o.AgentSocket == "" {
			return nil, release, fmt.Errorf("%w: UseAgent is set but AgentSocket is empty (is SSH_AUTH_SOCK set?)", ErrAuth)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", o.AgentSocket)
		if err != nil {
			return nil, release, fmt.Errorf("%w: ssh agent unreachable: %w", ErrAuth, err)
		}
		release = func() { c.Close() }
		ag = agent.NewClient(c)
	}
	if len(signers) > 0 || ag != nil {
		methods = append(methods, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			if ag == nil {
				return signers, nil
			}
			fromAgent, err := ag.Signers()
			if err != nil {
				return nil, fmt.Errorf("list ssh agent keys: %w", err)
			}
			return append(signers[:len(signers):len(signers)], fromAgent...), nil
		}))
	}
	if o.Password != "" {
		methods = append(methods, ssh.KeyboardInteractive(answerPassword(o.Password)), ssh.Password(o.Password))
	}
	if len(methods) == 0 {
		release()
		return nil, func() {}, fmt.Errorf("%w: no credentials: set Password, PrivateKey, KeyFile or UseAgent", ErrAuth)
	}
	return methods, release, nil
}

// parseKey parses an OpenSSH or PEM private key, decrypting it with
// passphrase when it is encrypted. what names the key in errors.
func parseKey(pem []byte, passphrase, what string) (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) && passphrase != "" {
		s, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(passphrase))
	}
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &missing):
		return nil, fmt.Errorf("%w: %s is encrypted and no passphrase was given", ErrAuth, what)
	case errors.Is(err, x509.IncorrectPasswordError):
		return nil, fmt.Errorf("%w: wrong passphrase for %s", ErrAuth, what)
	}
	return nil, fmt.Errorf("%w: %s: %v", ErrKey, what, err)
}

// answerPassword answers keyboard-interactive prompts the way a person
// with only a password would: the password for hidden prompts, nothing for
// echoed ones. A server that keeps asking after a few rounds is told no.
func answerPassword(password string) ssh.KeyboardInteractiveChallenge {
	rounds := 0
	return func(_, _ string, questions []string, echos []bool) ([]string, error) {
		if len(questions) == 0 {
			return nil, nil // an informational round
		}
		if rounds++; rounds > 3 {
			return nil, errors.New("keyboard-interactive: server keeps asking; giving up")
		}
		answers := make([]string, len(questions))
		for i := range questions {
			if !echos[i] {
				answers[i] = password
			}
		}
		return answers, nil
	}
}

// isAuthFailure reports whether a handshake error means the server
// refused every credential. An sshd without PAM that offers
// keyboard-interactive refuses it with a failure (message 51) before any
// prompt (60), which x/crypto/ssh reports as an unexpected message: a
// refusal all the same.
func isAuthFailure(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unable to authenticate") || strings.Contains(msg, "too many authentication failures") ||
		strings.Contains(msg, "unexpected message type 51 (expected 60)")
}
