package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sampled/sampled/internal/testing/redistest"
	"github.com/sampled/sampled/internal/testing/testlog"
)

// replicaWait bounds each wait of the replica tests: a guard against
// hangs, not a performance bound.
const replicaWait = 60 * time.Second

// replica is one sampled process.
type replica struct {
	name string
	url  string
	cmd  *exec.Cmd
	logs *testlog.Buffer
	done chan struct{} // closed once the process was waited for
}

// replicaBinaries are the built sampled and blocking MCP tool server.
type replicaBinaries struct{ server, tool string }

// binaries builds them once per test binary (set by TestMain).
var binaries func() (replicaBinaries, error)

// buildBinaries builds sampled and the blocking MCP tool server into dir.
func buildBinaries(dir string) (replicaBinaries, error) {
	b := replicaBinaries{server: filepath.Join(dir, "sampled"), tool: filepath.Join(dir, "blocktool")}
	for _, p := range []struct{ out, pkg string }{{b.server, "."}, {b.tool, "./testdata/blocktool"}} {
		if out, err := exec.Command("go", "build", "-o", p.out, p.pkg).CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %v\n%s", p.pkg, err, out)
		}
	}
	return b, nil
}

// built returns the binaries, failing t if they could not be built.
func built(t *testing.T) (server, tool string) {
	t.Helper()
	b, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	return b.server, b.tool
}

// startReplica runs the binary with the configuration file and the Redis
// URL on a free loopback port, and waits until it is ready. The process is killed at
// the end of the test, if still running; its logs are shown when the test
// failed.
func startReplica(t *testing.T, name, bin, config, redisURL string) *replica {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SAMPLED_ADDR=127.0.0.1:0",
		"SAMPLED_CONFIG=" + config, "SAMPLED_REDIS_URL=" + redisURL, "SAMPLED_LOG_FORMAT=text"}
	logs := &testlog.Buffer{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, cmd: cmd, logs: logs, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("logs of replica %s:\n%s", name, logs.String())
		}
	})
	select {
	case a := <-addr:
		r.url = "http://" + a
	case <-r.done:
		t.Fatalf("replica %s exited before it listened:\n%s", name, logs.String())
	case <-time.After(replicaWait):
		t.Fatalf("replica %s did not listen within %s", name, replicaWait)
	}
	deadline := time.Now().Add(replicaWait)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready within %s: %v", name, replicaWait, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}
}

// sseEvent is one event of a stream.
type sseEvent struct {
	ID   int64
	Name string
	Data string
}

// stream is an open GET /v1/loops/{id}/events.
type stream struct {
	events chan sseEvent // closed when the response ends
	cancel context.CancelFunc
	done   chan struct{}
}

// follow opens the run's event stream on r, after lastID (-1: no
// Last-Event-ID), and reads it in the background until it ends or Close.
func follow(t *testing.T, r *replica, id string, lastID int64) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/v1/loops/"+id+"/events", nil)
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("events of %s on %s: %v", id, r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		t.Fatalf("events of %s on %s: %d %s", id, r.name, resp.StatusCode, b)
	}
	s := &stream{events: make(chan sseEvent, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Close drops the connection, as a client that goes away does.
func (s *stream) Close() {
	s.cancel()
	<-s.done
}

// until reads events up to and including the first named name.
func (s *stream) until(t *testing.T, name string) []sseEvent {
	t.Helper()
	var got []sseEvent
	timer := time.NewTimer(replicaWait)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before %s; got %v", name, got)
			}
			got = append(got, ev)
			if ev.Name == name {
				return got
			}
		case <-timer.C:
			t.Fatalf("no %s within %s; got %v", name, replicaWait, got)
		}
	}
}

// rest reads events until the stream ends.
func (s *stream) rest(t *testing.T) []sseEvent {
	t.Helper()
	var got []sseEvent
	timer := time.NewTimer(replicaWait)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timer.C:
			t.Fatalf("the stream did not end within %s; got %v", replicaWait, got)
		}
	}
}

// checkLog checks that evs are the events 1..n of a run, each once, in
// order, the last one loop.completed with the status, and returns the
// terminal event's data.
func checkLog(t *testing.T, where string, evs []sseEvent, status string) map[string]any {
	t.Helper()
	for i, ev := range evs {
		if ev.ID != int64(i+1) {
			t.Fatalf("%s: event %d has id %d (%v): a gap or a duplicate", where, i+1, ev.ID, evs)
		}
	}
	end := evs[len(evs)-1]
	var data map[string]any
	if err := json.Unmarshal([]byte(end.Data), &data); err != nil || end.Name != "loop.completed" || data["status"] != status {
		t.Fatalf("%s: last event %s %s (%v), want loop.completed with status %s", where, end.Name, end.Data, err, status)
	}
	return data
}

// startLoop starts a loop that calls the blocking tool, on r.
func startLoop(t *testing.T, r *replica) string {
	t.Helper()
	body := `{"prompt":"Wait for me.","allowedTools":["block__wait"],"toolChoice":{"mode":"required"},"maxIterations":2}`
	resp, err := http.Post(r.url+"/v1/loops", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var started struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&started); err != nil || resp.StatusCode != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /v1/loops on %s: %d %+v %v", r.name, resp.StatusCode, started, err)
	}
	return started.ID
}

// getRun reads GET /v1/loops/{id} on r.
func getRun(t *testing.T, r *replica, id string) (status, errText string) {
	t.Helper()
	resp, err := http.Get(r.url + "/v1/loops/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var run struct{ Status, Error string }
	if err := json.NewDecoder(resp.Body).Decode(&run); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: %d %v", id, r.name, resp.StatusCode, err)
	}
	return run.Status, run.Error
}

// TestReplicas runs processes of the built binary on one Redis. A loop
// started on A is followed on B across a reconnect with Last-Event-ID and
// cancelled from B. A third replica, C, stopped gracefully (SIGTERM) in
// the middle of a loop, ends it cancelled itself. Then A is killed
// (SIGKILL) in the middle of another loop, and B ends that run failed
// within the lease bound. Every stream, on either replica, gets each
// event once and the end.
func TestReplicas(t *testing.T) {
	sock := redistest.Socket(t) // skips without redis-server, unless CI=true
	dir := t.TempDir()
	bin, tool := built(t)
	const lease = 2 * time.Second // long enough that a loaded machine does not stall A past it
	config := filepath.Join(dir, "sampled.yaml")
	cfg := fmt.Sprintf("redis:\n  leaseTTL: %s\nmcpServers:\n  block:\n    command: %s\n    required: true\n", lease, tool)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	redisURL := "unix://" + sock
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	a := startReplica(t, "A", bin, config, redisURL)
	b := startReplica(t, "B", bin, config, redisURL)

	t.Run("follow and cancel from B", func(t *testing.T) {
		id := startLoop(t, a)
		onA := follow(t, a, id, -1)
		onB := follow(t, b, id, -1)
		first := onB.until(t, "loop.started")
		onB.Close() // a forced reconnect
		seenA := onA.until(t, "tool.started")
		onB = follow(t, b, id, first[len(first)-1].ID)
		seenB := append(first, onB.until(t, "tool.started")...)

		req, _ := http.NewRequest(http.MethodDelete, b.url+"/v1/loops/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("DELETE on B = %d, want 202", resp.StatusCode)
		}
		seenA = append(seenA, onA.rest(t)...)
		seenB = append(seenB, onB.rest(t)...)
		checkLog(t, "A", seenA, "cancelled")
		checkLog(t, "B", seenB, "cancelled")
		if diff := cmp.Diff(seenA, seenB); diff != "" {
			t.Errorf("the streams on A and B differ (-A +B):\n%s", diff)
		}
		if status, _ := getRun(t, b, id); status != "cancelled" {
			t.Errorf("GET on B: status %q, want cancelled", status)
		}
	})

	t.Run("C stopped", func(t *testing.T) {
		c := startReplica(t, "C", bin, config, redisURL)
		id := startLoop(t, c)
		onB := follow(t, b, id, -1)
		seen := onB.until(t, "tool.started")
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		seen = append(seen, onB.rest(t)...)
		checkLog(t, "B", seen, "cancelled")
		// C ended it while it drained: no lease had to expire.
		if took := time.Since(stopped); took >= lease {
			t.Errorf("the run ended %v after C was stopped, want it ended by C, before its lease (%v) ran out", took, lease)
		}
		<-c.done
		if code := c.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("C exited with %d after SIGTERM, want 0", code)
		}
	})

	t.Run("A killed", func(t *testing.T) {
		id := startLoop(t, a)
		onB := follow(t, b, id, -1)
		seen := onB.until(t, "tool.started")
		if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-a.done
		killed := time.Now()
		seen = append(seen, onB.rest(t)...)
		took := time.Since(killed)
		end := checkLog(t, "B", seen, "failed")
		const reason = "replica running this loop stopped (lease expired)"
		if end["error"] != reason {
			t.Errorf("loop.completed error %q, want %q", end["error"], reason)
		}
		// The bound (lease and a third) and what a loaded machine may take
		// besides.
		bound := lease + lease/3
		t.Logf("B ended the run %v after A was killed (lease %v, bound %v)", took, lease, bound)
		if took > bound+time.Second {
			t.Errorf("B ended the run %v after A was killed, want within %v", took, bound)
		}
		if status, errText := getRun(t, b, id); status != "failed" || errText != reason {
			t.Errorf("GET on B: %q %q, want failed with the reason", status, errText)
		}
		// A later stream on B replays the same log to its end.
		if again := follow(t, b, id, -1).rest(t); !cmp.Equal(seen, again) {
			t.Errorf("a replay on B differs:\n%v\nwant\n%v", again, seen)
		}
	})
}

// TestReplicasRedisRestart: Redis, with its append-only file, restarts
// while a loop started on A waits in a tool call and B streams it. Both
// replicas reconnect; a cancel from B then reaches A, and the streams on A
// and B get every event once, to the end.
func TestReplicasRedisRestart(t *testing.T) {
	srv := redistest.New(t, true) // skips without redis-server, unless CI=true
	dir := t.TempDir()
	bin, tool := built(t)
	config := filepath.Join(dir, "sampled.yaml")
	// A lease longer than the restart: the run stays A's.
	cfg := fmt.Sprintf("redis:\n  leaseTTL: 5s\nmcpServers:\n  block:\n    command: %s\n    required: true\n", tool)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	redisURL := "unix://" + srv.Socket()
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	a := startReplica(t, "A", bin, config, redisURL)
	b := startReplica(t, "B", bin, config, redisURL)

	id := startLoop(t, a)
	onA := follow(t, a, id, -1)
	onB := follow(t, b, id, -1)
	seenA := onA.until(t, "tool.started")
	seenB := onB.until(t, "tool.started")
	srv.Down(t)
	srv.Up(t)
	// B answers again once its connections to Redis are made anew.
	deadline := time.Now().Add(replicaWait)
	for {
		req, _ := http.NewRequest(http.MethodDelete, b.url+"/v1/loops/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DELETE on B = %d after Redis restarted, want 202 within %s", resp.StatusCode, replicaWait)
		}
		t.Logf("DELETE on B right after the restart: %d", resp.StatusCode)
		time.Sleep(50 * time.Millisecond) // polling another process
	}
	seenA = append(seenA, onA.rest(t)...)
	seenB = append(seenB, onB.rest(t)...)
	checkLog(t, "A", seenA, "cancelled")
	checkLog(t, "B", seenB, "cancelled")
	if diff := cmp.Diff(seenA, seenB); diff != "" {
		t.Errorf("the streams on A and B differ (-A +B):\n%s", diff)
	}
}

// TestReplicasBudget: two replicas on one Redis share a key's budget of
// $0.0001 a day at offline/default's $10 per million output tokens. After
// a call on A, B refuses a call whose maxTokens passes the rest by one
// token (429 budget) and serves the one that fits it exactly, and
// GET /v1/keys/self says the same spend on both, the sum of the answers'
// costs.
func TestReplicasBudget(t *testing.T) {
	sock := redistest.Socket(t) // skips without redis-server, unless CI=true
	dir := t.TempDir()
	bin, _ := built(t)
	// A key of its own: no other run's spend is in this Redis for it.
	name, secret := "b"+strconv.FormatInt(time.Now().UnixNano(), 36), strconv.FormatInt(time.Now().UnixNano(), 16)+"-budget-key"
	config := filepath.Join(dir, "sampled.yaml")
	cfg := fmt.Sprintf(`providers:
  - name: offline
    type: offline
    models:
      - name: default
        price: {input: 2.5, output: 10}
apiKeys:
  - name: %s
    hash: sha256:%x
    usdPerDay: 0.0001
`, name, sha256.Sum256([]byte(secret)))
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, "A", bin, config, "unix://"+sock)
	b := startReplica(t, "B", bin, config, "unix://"+sock)
	do := func(r *replica, method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, r.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	// sample calls with maxTokens and returns the status, the answer's
	// cost in billionths of a dollar ($2.50 and $10 a million) and the
	// problem's limit.
	sample := func(r *replica, maxTokens int) (int, int64, string) {
		t.Helper()
		status, out := do(r, http.MethodPost, "/v1/sample", fmt.Sprintf(`{"prompt":"Name three primary colours.","maxTokens":%d}`, maxTokens))
		var res struct {
			Usage struct{ InputTokens, OutputTokens int64 }
			Limit string
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %s", r.name, out)
		}
		return status, res.Usage.InputTokens*2500 + res.Usage.OutputTokens*10000, res.Limit
	}
	status, spent, _ := sample(a, 2)
	if status != http.StatusOK {
		t.Fatalf("first call on A: %d", status)
	}
	fits := int((100_000 - spent) / 10_000)
	if status, _, limit := sample(b, fits+1); status != http.StatusTooManyRequests || limit != "budget" {
		t.Errorf("maxTokens %d on B with %d billionths spent on A: %d %q, want 429 budget", fits+1, spent, status, limit)
	}
	status, cost, _ := sample(b, fits)
	if status != http.StatusOK {
		t.Fatalf("maxTokens %d on B, exactly the rest: %d", fits, status)
	}
	spent += cost
	for _, r := range []*replica{a, b} {
		status, out := do(r, http.MethodGet, "/v1/keys/self", "")
		var ks struct {
			Usage struct{ Day, Month struct{ USD float64 } }
		}
		if err := json.Unmarshal(out, &ks); err != nil || status != http.StatusOK ||
			ks.Usage.Day.USD != float64(spent)/1e9 || ks.Usage.Month.USD != float64(spent)/1e9 {
			t.Errorf("keys/self on %s: %d %s, want $%v today and this month", r.name, status, out, float64(spent)/1e9)
		}
	}
}
