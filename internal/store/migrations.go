package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema file of a backend: NNNN_what.sql. A released
// file is never edited; a change is a new file.
type Migration struct {
	Version int
	Name    string // the file name, recorded beside the version
	SQL     string
}

// ParseMigrations reads the *.sql files of dir in fsys (a backend's
// embedded migrations) in version order, and checks that they are
// numbered from 1 without gaps.
func ParseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	files, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, f := range files {
		base := path.Base(f)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", base)
		}
		body, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.Name, i+1)
		}
	}
	return ms, nil
}
