package mcp

import (
	"errors"
	"testing"
)

func TestImageType(t *testing.T) {
	for _, tc := range []struct {
		head, want string
	}{
		{"\x89PNG\r\n\x1a\n....", "image/png"},
		{"\xff\xd8\xff\xe0..JFIF", "image/jpeg"},
		{"GIF89a...", "image/gif"},
		{"GIF87a...", "image/gif"},
		{"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"},
		{"RIFF\x10\x00\x00\x00WAVEfmt ", ""},
		{"<svg xmlns=", ""},
		{"\x89PNG", ""},
		{"", ""},
	} {
		if got := imageType([]byte(tc.head)); got != tc.want {
			t.Errorf("imageType(%q) = %q, want %q", tc.head, got, tc.want)
		}
	}
}

func TestIsText(t *testing.T) {
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"plain\n", true},
		{"héllo", true},
		{"cut at the end: \xc3", true}, // the first byte of é
		{"cut at the end: \xe2\x82", true},
		{"nul\x00inside", false},
		{"\xff\xfe bad", false},
		{"", true},
	} {
		if got := isText([]byte(tc.head)); got != tc.want {
			t.Errorf("isText(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
}

func TestDecodeContent(t *testing.T) {
	for _, tc := range []struct {
		content, encoding string
		want              string
		field             string // of the invalid_arguments, or "" for success
	}{
		{"text é", "", "text é", ""},
		{"text", "utf8", "text", ""},
		{"aGk=", "base64", "hi", ""},
		{"aGk", "base64", "", "content"},
		{"not base64!", "base64", "", "content"},
		{"x", "hex", "", "encoding"},
		{"x", "UTF8", "", "encoding"},
	} {
		got, err := decodeContent(tc.content, tc.encoding, 1<<20)
		var f *failure
		switch {
		case tc.field == "" && (err != nil || string(got) != tc.want):
			t.Errorf("decodeContent(%q, %q) = %q, %v", tc.content, tc.encoding, got, err)
		case tc.field != "" && (!errors.As(err, &f) || f.fields["field"] != tc.field):
			t.Errorf("decodeContent(%q, %q): %v, want invalid_arguments on %s", tc.content, tc.encoding, err, tc.field)
		}
	}
	if _, err := decodeContent("aGVsbG8gd29ybGQ=", "base64", 4); err == nil {
		t.Error("base64 past the limit decoded")
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"", 0, true}, {"644", 0o644, true}, {"0755", 0o755, true}, {"0600", 0o600, true},
		{"4755", 0, false}, {"1777", 0, false}, {"0", 0, false}, {"rwx", 0, false}, {"-644", 0, false}, {"0o644", 0, false},
	} {
		got, err := parseMode(tc.in)
		if (err == nil) != tc.ok || uint32(got) != tc.want {
			t.Errorf("parseMode(%q) = %o, %v", tc.in, got, err)
		}
	}
}
