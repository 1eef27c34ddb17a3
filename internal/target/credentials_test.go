package target

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/config"
)

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("file-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TANDEM_TEST_FORGE_TOKEN", "env-secret-0123456789")
	r := &Resolver{}
	creds, held, err := r.credentials("dev", []config.Credential{
		{Name: "api", Host: "api.test", Value: "Bearer {secret}", SecretFile: file},
		{Name: "forge", Host: "git.test", Header: "PRIVATE-TOKEN", Value: "Basic {x-access-token:secret}", SecretEnv: "TANDEM_TEST_FORGE_TOKEN", Replace: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 2 || creds[0].Header != "Authorization" || creds[0].Value != "Bearer file-secret-0123456789" ||
		creds[1].Header != "PRIVATE-TOKEN" || creds[1].Value != "Basic eC1hY2Nlc3MtdG9rZW46ZW52LXNlY3JldC0wMTIzNDU2Nzg5" || !creds[1].Replace {
		t.Fatalf("credentials %+v", creds)
	}
	// Each secret, and the Basic credential's base64, is a redaction literal.
	var lits []string
	for _, l := range held {
		lits = append(lits, l.Value)
	}
	if want := "file-secret-0123456789 env-secret-0123456789 eC1hY2Nlc3MtdG9rZW46ZW52LXNlY3JldC0wMTIzNDU2Nzg5"; strings.Join(lits, " ") != want {
		t.Errorf("literals %q, want %q", lits, want)
	}
	// What viewers, the recording and the audit see loses those values
	// only: no pattern of the agent's redactor applies there.
	red, err := heldRedactor(held)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"echo: Bearer file-secret-0123456789":                                   "echo: Bearer [REDACTED:credential]",
		"Authorization: Basic eC1hY2Nlc3MtdG9rZW46ZW52LXNlY3JldC0wMTIzNDU2Nzg5": "Authorization: Basic [REDACTED:credential]",
		"AKIAIOSFODNN7EXAMPLE and env-secret-0123456789":                        "AKIAIOSFODNN7EXAMPLE and [REDACTED:credential]",
	} {
		if got, _ := red.String(in); got != want {
			t.Errorf("held redactor: %q became %q, want %q", in, got, want)
		}
	}
	if red, err := heldRedactor(nil); red != nil || err != nil {
		t.Errorf("no credentials: redactor %v, %v; want none", red, err)
	}
	// A missing secret fails the session without naming the variable or
	// the file to the agent.
	for _, c := range []config.Credential{
		{Name: "gone", Host: "api.test", Value: "{secret}", SecretEnv: "TANDEM_TEST_NOT_SET"},
		{Name: "gone", Host: "api.test", Value: "{secret}", SecretFile: filepath.Join(dir, "missing")},
	} {
		_, _, err := r.credentials("dev", []config.Credential{c})
		if !errors.Is(err, ErrCredential) || strings.Contains(err.Error(), "TANDEM_TEST_NOT_SET") || strings.Contains(err.Error(), dir) {
			t.Errorf("%+v: error %v, want ErrCredential naming neither the variable nor the path", c, err)
		}
	}
}
