package session

import (
	"strconv"
	"testing"
	"time"
)

// TestUserFiles: the files viewers moved are taken once, oldest first,
// a watcher hears of each, and what is kept is bounded.
func TestUserFiles(t *testing.T) {
	s := &Session{}
	signals := 0
	stop := s.Changes(func() { signals++ })
	defer stop()
	at := time.Unix(1000, 0)
	s.FileMoved(UserFile{Path: "a.txt", Bytes: 3, SHA256: "x", Viewer: "operator", Direction: FileUpload, At: at})
	s.FileMoved(UserFile{Path: "b.txt", Bytes: 4, SHA256: "y", Viewer: "admitted viewer", Direction: FileDownload, At: at.Add(time.Second)})
	if signals != 2 {
		t.Errorf("%d signals for 2 files", signals)
	}
	got := s.TakeUserFiles()
	if len(got) != 2 || got[0].Path != "a.txt" || got[1].Direction != FileDownload || got[1].Viewer != "admitted viewer" {
		t.Fatalf("took %+v", got)
	}
	if again := s.TakeUserFiles(); len(again) != 0 {
		t.Errorf("told twice: %+v", again)
	}
	for i := range maxUserFiles + 3 {
		s.FileMoved(UserFile{Path: strconv.Itoa(i)})
	}
	if got := s.TakeUserFiles(); len(got) != maxUserFiles || got[0].Path != "3" {
		t.Errorf("kept %d, the first %s", len(got), got[0].Path)
	}
}
