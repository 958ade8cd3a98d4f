// Package console is sampled's web console: static HTML, CSS and
// JavaScript modules, embedded in the binary and served under /console.
// The pages call only the service's public HTTP API (api/openapi.yaml),
// from the browser, with the visitor's API key when one is needed.
package console

import (
	"bytes"
	"embed"
	"encoding/json"
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

// Names lists the embedded files, for tests.
func Names() []string {
	var names []string
	for n := range assets {
		names = append(names, n)
	}
	return names
}

// start is the build's time, the files' modification time for
// conditional requests: the embedded files change only with the binary.
var start = time.Now()

// Handler serves the console: GET /console is its page (index.html), GET
// /console/{name} an asset. Another path under /console answers a 404
// problem document. Every answer carries the console's
// Content-Security-Policy.
func Handler() http.Handler {
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
			notFound(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		http.ServeContent(w, r, name, start, bytes.NewReader(a.body))
	})
}

// notFound answers a problem document, as the service's other routes do.
func notFound(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if len(p) > 200 {
		p = p[:200]
	}
	b, _ := json.Marshal(map[string]any{
		"type":     "https://sampled.dev/problems/not-found",
		"title":    "Not found",
		"status":   http.StatusNotFound,
		"detail":   "the console has no file " + p,
		"instance": p,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(b)
}
