package auth

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParseTokens: a tokens file either parses into a table where every
// listed token and client subject finds its own principal, with a known
// role, and nothing else does; or is refused with an error naming the
// entry (tokens[i], clients[i]) or the YAML's problem.
func FuzzParseTokens(f *testing.F) {
	b, err := os.ReadFile("testdata/tokens.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range []string{
		"", "tokens: []", "clients:\n  - subject: a\n    role: reader\n  - subject: a\n    role: admin\n",
		"tokens:\n  - name: a\n    role: reader\n    token: short\n",
		"tokens:\n  - name: a\n    role: root\n    token: 0123456789abcdef\n",
		"tokens:\n  - name: a\n    role: reader\n    token: 0123456789abcdef\n  - name: b\n    role: admin\n    token: 0123456789abcdef\n",
		"tokens:\n  - name: a\n    role: reader\n    token: 0123456789abcdef\n    token_sha256: 00\n",
		"tokens:\n  - name: a\n    role: alertmanager\n    token_sha256: ZZ\n",
		"tokens:\n  - name: \"\"\n", "tokens:\n  - name: a\n    role: reader\n    tokn: x\n", "tokens: {}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := parse(data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "yaml: ") && !strings.HasPrefix(msg, "tokens[") && !strings.HasPrefix(msg, "clients[") {
				t.Fatalf("error names neither the YAML nor an entry: %v", err)
			}
			return
		}
		// What the file lists, read again the way parse reads it.
		var ff fileFormat
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&ff); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("parse accepted what does not decode: %v", err)
		}
		if len(tab.tokens) != len(ff.Tokens) || len(tab.clients) != len(ff.Clients) {
			t.Fatalf("table has %d tokens and %d clients, the file %d and %d", len(tab.tokens), len(tab.clients), len(ff.Tokens), len(ff.Clients))
		}
		for i, e := range ff.Tokens {
			if e.Token == "" {
				continue
			}
			if len(e.Token) < MinTokenLen {
				t.Fatalf("tokens[%d]: a token of %d characters accepted", i, len(e.Token))
			}
			p, ok := tab.token(e.Token)
			if !ok || p.Name != e.Name || p.Role != e.Role || !validRole(p.Role) {
				t.Fatalf("tokens[%d] (%s, %s): token finds %+v, %v", i, e.Name, e.Role, p, ok)
			}
			if _, ok := tab.token(e.Token + "x"); ok && !strings.Contains(string(data), e.Token+"x") {
				t.Fatalf("tokens[%d]: its token with a byte added is accepted", i)
			}
		}
		for i, c := range ff.Clients {
			p, ok := tab.clients[c.Subject]
			if !ok || p.Role != c.Role || !validRole(p.Role) || p.Name == "" {
				t.Fatalf("clients[%d] (%s): finds %+v, %v", i, c.Subject, p, ok)
			}
		}
		if _, ok := tab.token(""); ok {
			t.Fatal("the empty token is accepted")
		}
	})
}
