package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-sh/tandem/internal/store"
)

// BrokenError names the first record where the chain does not hold, and
// why: it is what `tandem audit verify` reports.
type BrokenError struct {
	Seq    int64  // the record that is altered, missing or mislinked
	Reason string // e.g. "hash mismatch (record altered)"
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken: record %d: %s", e.Seq, e.Reason)
}

// Verify walks every record in seq order and checks that seqs run 1, 2, 3
// ... without gaps, that each PrevHash is the Hash of the record before
// (GenesisHash for record 1), and that each Hash is the hash of its record.
// It returns how many records it checked. On the first failure it returns
// the count of intact records before it and a *BrokenError.
func Verify(ctx context.Context, st Reader) (int64, error) {
	var (
		n    int64
		prev = GenesisHash
	)
	err := st.ScanAudit(ctx, func(r Record) error {
		if err := checkLink(n, prev, r); err != nil {
			return err
		}
		if Hash(r) != r.Hash {
			return &BrokenError{Seq: r.Seq, Reason: "hash mismatch (record altered)"}
		}
		prev = r.Hash
		n++
		return nil
	})
	var corrupt *store.CorruptRecordError
	switch {
	case errors.As(err, &corrupt):
		return n, &BrokenError{Seq: corrupt.Seq, Reason: fmt.Sprintf("unreadable (record altered): %v", corrupt.Err)}
	case err != nil:
		var broken *BrokenError
		if errors.As(err, &broken) {
			return n, broken
		}
		return n, fmt.Errorf("audit verify: %w", err)
	}
	return n, nil
}

// checkLink checks that r directly follows record last, whose hash is prev.
func checkLink(last int64, prev string, r Record) error {
	switch {
	case r.Seq != last+1 && last == 0:
		return &BrokenError{Seq: 1, Reason: fmt.Sprintf("missing: the log starts at record %d", r.Seq)}
	case r.Seq != last+1:
		return &BrokenError{Seq: last + 1, Reason: fmt.Sprintf("missing: seq gap after %d (next record is %d)", last, r.Seq)}
	case r.PrevHash != prev && last == 0:
		return &BrokenError{Seq: r.Seq, Reason: "prev_hash is not the genesis hash"}
	case r.PrevHash != prev:
		return &BrokenError{Seq: r.Seq, Reason: fmt.Sprintf("prev_hash does not match record %d", last)}
	}
	return nil
}
