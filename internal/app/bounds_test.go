package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sampled/sampled/internal/loop"
	"github.com/sampled/sampled/internal/sampler"
	"github.com/sampled/sampled/internal/testing/redistest"
)

// TestRunBoundsConfigured: limits.toolResultBytes and limits.runBytes
// bound the loops of the service, with runs in memory or in Redis.
func TestRunBoundsConfigured(t *testing.T) {
	stores := map[string]func(t *testing.T) map[string]string{
		"memory": func(*testing.T) map[string]string { return map[string]string{"SAMPLED_CONFIG": "sampled.yaml"} },
		"redis": func(t *testing.T) map[string]string {
			return map[string]string{"SAMPLED_CONFIG": "sampled.yaml", "SAMPLED_REDIS_URL": "unix://" + redistest.Socket(t)}
		},
	}
	const prompt = `{"prompt":"calculate 2 * (3 + 4)"}`
	for name, env := range stores {
		t.Run(name+"/tool result cut", func(t *testing.T) {
			_, url, _ := serve(t, loadConfig(t, env(t), "providers: [{name: offline, type: offline, models: [{name: default}]}]\nlimits: {toolResultBytes: 1}\n"))
			snap := runLoop(t, url, prompt)
			res := toolResults(snap)
			if snap.Status != loop.StatusCompleted || len(res) != 1 {
				t.Fatalf("status %s, %d tool results; want completed, 1", snap.Status, len(res))
			}
			if text := sampler.TextOf(res[0].Content); !strings.HasPrefix(text, "1") || !strings.Contains(text, "sampled cut this tool result") {
				t.Errorf("tool result %q, want its first byte (of 14) and the marker", text)
			}
		})
		t.Run(name+"/run past its size", func(t *testing.T) {
			_, url, _ := serve(t, loadConfig(t, env(t), "providers: [{name: offline, type: offline, models: [{name: default}]}]\nlimits: {runBytes: 600}\n"))
			snap := runLoop(t, url, prompt)
			if snap.Status != loop.StatusFailed || !strings.Contains(snap.Error, "size limit of 600 bytes") {
				t.Errorf("status %s, error %q; want failed past the size limit of 600 bytes", snap.Status, snap.Error)
			}
		})
	}
}

// TestListLoopsCostIndependentOfRunSize: GET /v1/loops reads the runs'
// summaries; with an 8 MB run kept, a page costs what it costs without.
func TestListLoopsCostIndependentOfRunSize(t *testing.T) {
	_, url, _ := serve(t, loadConfig(t, map[string]string{"SAMPLED_MAX_BODY_BYTES": fmt.Sprint(16 << 20)}, ""))
	body, _ := json.Marshal(map[string]string{"prompt": strings.Repeat("x", 8<<20)})
	snap := runLoop(t, url, string(body))
	if snap.Status != loop.StatusCompleted {
		t.Fatalf("the big run: %s %s", snap.Status, snap.Error)
	}
	const lists = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range lists {
		code, page := get(t, url+"/v1/loops")
		if code != http.StatusOK || !strings.Contains(page, snap.ID) || len(page) > 4096 {
			t.Fatalf("GET /v1/loops = %d, %d bytes: %.300s", code, len(page), page)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / lists; per > 1<<20 {
		t.Errorf("a page of GET /v1/loops allocated %d bytes with an 8 MB run kept; want under 1 MiB", per)
	}
}

// TestLoopRoutesRedisDown: with Redis unreachable, every loop route
// answers 503 with Retry-After, as /readyz does, and soon.
func TestLoopRoutesRedisDown(t *testing.T) {
	_, url, _ := serve(t, redisConfig(t, "unix://"+t.TempDir()+"/none.sock"))
	routes := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/loops", `{"prompt":"hi"}`},
		{http.MethodGet, "/v1/loops", ""},
		{http.MethodGet, "/v1/loops/loop_0123456789abcdef", ""},
		{http.MethodGet, "/v1/loops/loop_0123456789abcdef/events", ""},
		{http.MethodDelete, "/v1/loops/loop_0123456789abcdef", ""},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), rt.method, url+rt.path, strings.NewReader(rt.body))
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			}
			err = json.NewDecoder(resp.Body).Decode(&p)
			took := time.Since(start)
			if resp.StatusCode != http.StatusServiceUnavailable || p.Status != http.StatusServiceUnavailable || err != nil {
				t.Errorf("status %d, problem %+v, %v; want 503", resp.StatusCode, p, err)
			}
			if resp.Header.Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
			if took > 3*time.Second {
				t.Errorf("answered after %s; want it within 3s", took)
			}
		})
	}
}
