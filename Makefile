# tandem: the README's commands. Everything here is plain go tooling.
GO ?= go

.PHONY: build run test race lint bench fuzz deps

build:
	$(GO) build -buildvcs=true -o bin/tandem ./cmd/tandem

# Run tandem on its embedded defaults: one sandboxed local target rooted at
# the current directory, MCP over stdio, browser terminal on 127.0.0.1:7777.
run:
	$(GO) run ./cmd/tandem serve

# The whole suite, against real sshd, bash, Chromium and MCP clients.
# It prints each package as its tests start and each test as it ends
# (.ci/progress; a test that never ends is named with its stack), and
# keeps the tests' temp files in a directory of their own that is removed
# even on Ctrl-C. Every program a test starts runs in a session of its own,
# so the result is the same in a terminal, in tmux and without one.
test:
	@echo "make test: go vet, then every package's tests against real sshd, bash, Chromium, PostgreSQL and MCP clients."
	@echo "About 9 minutes on two cores, after a first compile of about 5; a line as each package starts testing and as each test ends."
	$(GO) vet ./...
	bash -o pipefail -c 'dir=$$(mktemp -d "$${TMPDIR:-/tmp}/tandem-test.XXXXXX") && chmod 1777 "$$dir" && \
		trap "rm -rf \"$$dir\"" EXIT INT TERM && \
		TMPDIR="$$dir" $(GO) test -count=1 -timeout 20m -json ./... | python3 .ci/progress'

# The race detector needs cgo and a C compiler (gcc).
race:
	$(GO) test -race -count=1 -timeout 30m ./...

lint:
	test -z "$$(gofmt -l .)"
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Latency against the floor (one persistent x/crypto/ssh connection, an exec
# channel per command, same sshd and user), with the go-sdk client and with
# the TypeScript SDK's (bench/client.mjs, needs Node 20+) and local calls over
# HTTP beside stdio; idle HTTP sessions' RSS, the per-request claim check, then
# heap figures. BenchmarkCluster (PostgreSQL): the forwarded call's overhead over a
# local one, and audited calls/s on one node and on three. BenchmarkHandover: a
# human's 2,000-line paste to the agent's complete report, and ssh_read_output's
# waitSeconds from a command's end to the reply. BenchmarkExecJudging: one
# command that starts /bin/true 1,000 times in the sandbox, exec judging off
# and on, and the policy's median decision per exec. BenchmarkProxy: a 1 GiB
# download and a new connection, directly and through the egress proxy.
# BenchmarkRedactReply: the bounded reply of seq 1 100000 through the
# TypeScript SDK, with the default redaction patterns and without.
# BenchmarkManyLiterals: redaction against a .env of 80,000 values that share
# a prefix, the worst case of literal matching, beside BenchmarkRedactSeq.
# BenchmarkSSHSpeed (two busy loops on the CPUs): ssh_connect, a viewer's
# Ctrl-C to the program's SIGINT and command_timeout's lateness over SSH
# (empty rc, and an rc that takes 0.5 s) beside a local session.
# BenchmarkPreviewLatency: what a preview URL adds to a request to the
# agent's dev server over asking it directly (median; target ≤ 2 ms), in a
# local session's namespace, on the host's network and over SSH.
# BenchmarkTransfer: ssh_upload and ssh_download of 100 MiB (two 50 MiB files,
# base64 in JSON, downloads read back by resources/read) over SSH and locally,
# beside scp of the same 100 MiB to the same sshd (go-sdk client; the
# TypeScript SDK's in BenchmarkTransferTS, scp taking turns with it, and
# with TANDEM_BENCH_BASELINE=an-older-tandem that build too, and a floor:
# bench/floor.mjs, a server doing only what any server must); BenchmarkFiles
# the same through the transfer layer alone (SFTP), before any MCP encoding.
bench:
	cd bench && npm ci --no-audit --no-fund
	$(GO) test -run '^$$' -bench 'BenchmarkExecLatency|BenchmarkTSClient|BenchmarkHugeOutputRSS|BenchmarkIdleSessionsRSS|BenchmarkCluster|BenchmarkHandover|BenchmarkSSHSpeed|BenchmarkPreviewLatency|BenchmarkTransfer' -benchtime 1x ./cmd/tandem/
	$(GO) test -run '^$$' -bench 'BenchmarkFiles' -benchtime 1x ./internal/transfer/
	$(GO) test -run '^$$' -bench 'BenchmarkVerify(Cached|Uncached)$$' ./internal/claim/
	$(GO) test -run '^$$' -bench 'BenchmarkDecide' -count 5 ./internal/policy/
	$(GO) test -run '^$$' -bench 'BenchmarkExecJudging' -benchtime 3x ./internal/execguard/
	$(GO) test -run '^$$' -bench 'BenchmarkHeap' -benchtime 1x ./internal/mcp/
	$(GO) test -run '^$$' -bench 'BenchmarkEncodeResult' ./internal/mcp/
	$(GO) test -run '^$$' -bench 'BenchmarkAuditedCalls' -benchtime 10000x ./internal/mcp/
	$(GO) test -run '^$$' -bench 'BenchmarkAppend|BenchmarkVerify100k' ./internal/audit/ ./internal/store/ ./internal/jsonstr/
	$(GO) test -run '^$$' -bench 'BenchmarkOutput100MBps' -benchtime 10s ./internal/recording/
	$(GO) test -run '^$$' -bench 'BenchmarkShell' ./internal/shell/
	$(GO) test -run '^$$' -bench 'BenchmarkProxy' -benchtime 1x ./internal/egress/
	$(GO) test -run '^$$' -bench 'BenchmarkRedactReply' -benchtime 1x ./cmd/tandem/
	$(GO) test -run '^$$' -bench 'BenchmarkNetNamespace' -benchtime 1x ./cmd/tandem/
	$(GO) test -run '^$$' -bench 'BenchmarkRedactSeq|BenchmarkManyLiterals' ./internal/redact/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParser -fuzztime 30s ./internal/term/
	$(GO) test -run '^$$' -fuzz FuzzPlain -fuzztime 30s ./internal/term/
	$(GO) test -run '^$$' -fuzz FuzzUnescape -fuzztime 30s ./internal/term/
	$(GO) test -run '^$$' -fuzz FuzzTerminalFilter -fuzztime 30s ./internal/term/
	$(GO) test -run '^$$' -fuzz FuzzFrames -fuzztime 30s ./internal/shell/
	$(GO) test -run '^$$' -fuzz FuzzHistoryLines -fuzztime 30s ./internal/shell/
	$(GO) test -run '^$$' -fuzz FuzzDecodeArgs -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzStdioLines -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzPlan -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzCollapseFrames -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzGrep -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzInflightBody -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzHeldState -fuzztime 30s ./internal/mcp/
	$(GO) test -run '^$$' -fuzz FuzzOutput -fuzztime 30s ./internal/recording/
	$(GO) test -run '^$$' -fuzz FuzzVerify -fuzztime 30s ./internal/claim/
	$(GO) test -run '^$$' -fuzz FuzzDecide -fuzztime 30s ./internal/policy/
	$(GO) test -run '^$$' -fuzz FuzzParserAgreesWithBash -fuzztime 30s ./internal/policy/
	$(GO) test -run '^$$' -fuzz FuzzParseShebang -fuzztime 30s ./internal/execguard/
	$(GO) test -run '^$$' -fuzz FuzzRoute -fuzztime 30s ./internal/cluster/
	$(GO) test -run '^$$' -fuzz FuzzAppend -fuzztime 30s ./internal/jsonstr/

# Test dependencies on Debian/Ubuntu (run as root): installs only what is
# missing, so a Node.js from NodeSource (which brings its own npm) is kept.
deps:
	.ci/deps
