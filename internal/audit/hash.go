package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"
	"time"
)

// GenesisHash is the PrevHash of record 1: there is nothing before it.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// hashDomain tags each version of the encoding, so one version cannot
// produce the same bytes as another for a different record.
var hashDomain = map[int]string{1: "tandem-audit-v1\n", 2: "tandem-audit-v2\n"}

// HashVersion is the encoding new records are written with.
const HashVersion = 2

// Hash returns the hash a record must carry: hex SHA-256 of its canonical
// encoding (see the package doc). r.Hash itself is not covered.
func Hash(r Record) string {
	domain, ok := hashDomain[r.HashVersion]
	if !ok {
		return "unknown hash version " + strconv.Itoa(r.HashVersion)
	}
	h := sha256.New()
	e := encoder{h: h}
	e.raw(domain)
	e.str(r.PrevHash)
	e.int(r.Seq)
	e.str(r.Time.UTC().Format(time.RFC3339Nano))
	e.str(r.Tenant)
	e.str(r.Actor)
	e.str(r.ClaimFingerprint)
	e.str(r.JTI)
	e.str(r.SessionID)
	e.str(r.SessionName)
	e.str(r.Target)
	e.str(r.Tool)
	e.str(r.Event)
	e.bytes(r.Args)
	e.str(r.Outcome)
	e.str(r.Reason)
	e.opt(r.ExitCode)
	e.int(r.DurationMs)
	e.int(r.Bytes)
	e.str(r.ApprovalID)
	if r.HashVersion >= 2 {
		e.str(r.SID)
		e.str(r.Workspace)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// encoder writes the length-prefixed fields of the hash encoding.
type encoder struct {
	h   hash.Hash
	buf [9]byte
}

func (e *encoder) raw(s string) { e.h.Write([]byte(s)) }

func (e *encoder) str(s string) {
	binary.BigEndian.PutUint64(e.buf[:8], uint64(len(s)))
	e.h.Write(e.buf[:8])
	e.raw(s)
}

func (e *encoder) bytes(b []byte) {
	binary.BigEndian.PutUint64(e.buf[:8], uint64(len(b)))
	e.h.Write(e.buf[:8])
	e.h.Write(b)
}

func (e *encoder) int(n int64) {
	binary.BigEndian.PutUint64(e.buf[:8], uint64(n))
	e.h.Write(e.buf[:8])
}

func (e *encoder) opt(p *int) {
	if p == nil {
		e.h.Write([]byte{0})
		return
	}
	e.buf[0] = 1
	binary.BigEndian.PutUint64(e.buf[1:9], uint64(int64(*p)))
	e.h.Write(e.buf[:9])
}
