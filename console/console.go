package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/auth"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every console response: scripts,
// styles, images and fetches from this origin only (images also as data:
// URLs), no inline script or style, no base, no form posts, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// IndexFile is the page served at auth.ConsolePath, a file of static/.
const IndexFile = "index.html"

// Options configures Handler. The zero value is the console as shipped.
type Options struct {
	// Files replaces the embedded static/ tree (tests); nil serves the
	// embedded one.
	Files fs.FS
}

// asset is one file, read once at start.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// handler serves the index page and the assets, all held in memory.
type handler struct {
	assets map[string]asset // path under static/ → file
	start  time.Time
}

// Handler serves the console: GET (and HEAD) of auth.ConsolePath is
// index.html, of auth.ConsolePrefix+<file> a file of static/. Unknown files
// are 404, other methods 405. Responses are revalidated by ETag
// (Cache-Control: no-cache), so a new binary's files are picked up at the
// next load.
func Handler(opts Options) http.Handler {
	files := opts.Files
	if files == nil {
		sub, err := fs.Sub(static, "static")
		if err != nil {
			panic("console: embedded static/ missing: " + err.Error()) // a build defect
		}
		files = sub
	}
	h := &handler{assets: map[string]asset{}, start: time.Now()}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.assets[p] = asset{body: b, contentType: contentType(p), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: reading static files: " + err.Error())
	}
	return h
}

// Assets lists the files Handler serves under auth.ConsolePrefix, as
// paths relative to it (pages/fleet.js), for tests and tools.
func Assets(opts Options) []string {
	h := Handler(opts).(*handler)
	out := make([]string, 0, len(h.assets))
	for p := range h.assets {
		out = append(out, p)
	}
	return out
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: the console answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	var name string
	switch {
	case r.URL.Path == auth.ConsolePath:
		name = IndexFile
	case strings.HasPrefix(r.URL.Path, auth.ConsolePrefix):
		name = strings.TrimPrefix(r.URL.Path, auth.ConsolePrefix)
		if name != path.Clean("/" + name)[1:] {
			name = "" // no ./, ../ or // games: files are named exactly
		}
	}
	a, ok := h.assets[name]
	if !ok || name == "" {
		http.Error(w, "no console file "+r.URL.Path+"; the console is at "+auth.ConsolePath, http.StatusNotFound)
		return
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, "", h.start, bytes.NewReader(a.body))
}

// contentType is the media type of a static file, by its extension.
func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	case ".json":
		return "application/json"
	default:
		return "application/octet-stream"
	}
}
