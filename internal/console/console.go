// Package console is sampled's web console: static HTML, CSS and
// JavaScript modules, embedded in the binary and served under /console.
// The pages call only the service's public HTTP API (api/openapi.yaml),
// from the browser, with the visitor's API key when one is needed.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var files embed.FS

// Policy is the Content-Security-Policy of every console response: the
// pages load scripts, styles and images from the service alone, run no
// inline script or style, and talk to no other origin.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Prefix is the path the console is served under: Prefix itself is its
// page, Prefix + "/" + name its assets.
const Prefix = "/console"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
}

// assets are the embedded files by name; the console's assets sit flat in
// static/, so one path segment names each.
var assets = func() map[string]asset {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	m := map[string]asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the host's MIME tables
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		m[p] = asset{body: b, contentType: ct}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return m
}()

// start is the process's start, the files' modification time for
// conditional requests: the embedded files change only with the binary.
var start = time.Now()

// Handler serves the console: GET /console is its page (index.html), GET
// /console/{name} an asset. Another path under /console is passed to
// notFound, the service's own 404. Every answer carries the console's
// Content-Security-Policy.
func Handler(notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := ""
		switch {
		case r.URL.Path == Prefix:
			name = "index.html"
		case strings.HasPrefix(r.URL.Path, Prefix+"/"):
			name = strings.TrimPrefix(r.URL.Path, Prefix+"/")
		}
		a, ok := assets[name]
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		http.ServeContent(w, r, name, start, bytes.NewReader(a.body))
	})
}
