// Package redact keeps secrets out of text an AI agent will read. It owns
// the rules that say what a secret looks like (values from secret files and
// environment variables, literal values tandem holds, built-in token
// patterns and, on request, long random-looking strings) and the
// replacement of each one by a marker naming its kind:
//
//	AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE  ->  AWS_ACCESS_KEY_ID=[REDACTED:aws-key]
//
// It knows text only: nothing of PTYs, SSH, sessions, MCP or where the
// output goes. It reads the secret files it is given, and nothing else.
//
// # Where to start
//
// [New] compiles a [Config] into a [Redactor], which is immutable and safe
// for concurrent use. [Redactor.String] and [Redactor.Bytes] redact a whole
// text; [Redactor.Stream] wraps an [io.Writer] for a byte stream that
// arrives in pieces (PTY reads), and finds a secret split across writes:
//
//	Write("key AKIA")         Write("IOSFODNN7EXAMPLE\n")        Flush()
//	     |                            |                            |
//	emits "key ",             emits "[REDACTED:aws-key]\n"   emits what is
//	holds "AKIA"                                             still held
//
// # Kinds
//
// A marker's kind says which rule matched: file (a value from a secret
// file), env (the value of a named environment variable), the kind given
// with a [Literal] (e.g. ssh-password), and for the built-in patterns
// aws-key, aws-secret, github, gitlab, slack, stripe, jwt, private-key,
// url-password, password and entropy.
//
// # Matching
//
// Every rule is tried at every position where it could begin, and a rule
// looks at a bounded window of text there: literals their own length, PEM
// private keys 16 KiB, JWTs about 8 KiB, long random strings 4 KiB, other
// tokens a few hundred bytes. Matches that overlap merge into one marker,
// named by the match that starts first (the longest, if several start
// together; a literal before a pattern, if they are as long). Redacting a
// text whole and streaming it in any pieces give the same output.
//
// A cheap filter on the first two bytes of every rule's prefix skips most
// text: output with no secret in it, such as a build log or a directory
// listing, costs little more than a scan of its bytes.
package redact
