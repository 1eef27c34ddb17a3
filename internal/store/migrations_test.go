package store_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tandem-sh/tandem/internal/store"
)

func TestParseMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want string // error part, or "" for success
	}{
		{"ordered", fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A")}, ""},
		{"gap", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0003_c.sql": file("C")}, "expected version 2"},
		{"bad name", fstest.MapFS{"m/first.sql": file("A")}, "name must be NNNN_what.sql"},
		{"zero", fstest.MapFS{"m/0000_a.sql": file("A")}, "name must be NNNN_what.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := store.ParseMigrations(tc.fs, "m")
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil || len(ms) != 2 || ms[0].SQL != "A" || ms[1].Name != "0002_b.sql" || ms[1].Version != 2 {
				t.Fatalf("got %+v, %v", ms, err)
			}
		})
	}
}
