package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/sampled/sampled/internal/app"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exchange is a request to the service and its answer.
type exchange struct {
	path     string
	status   int
	req, res []byte
}

// wire records the exchanges with the service.
type wire struct {
	mu sync.Mutex
	xs []exchange
}

// capture keeps what a handler writes.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(code int) { c.status = code; c.ResponseWriter.WriteHeader(code) }
func (c *capture) Write(b []byte) (int, error) {
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (w *wire) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(req))
		c := &capture{ResponseWriter: rw, status: http.StatusOK}
		next.ServeHTTP(c, r)
		w.mu.Lock()
		w.xs = append(w.xs, exchange{path: r.URL.Path, status: c.status, req: req, res: c.body.Bytes()})
		w.mu.Unlock()
	})
}

func (w *wire) exchanges() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.xs)
}

// service is sampled with its offline provider on a loopback port.
func service(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	a, err := app.New(context.Background(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wrap(a.Handler))
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return srv
}

// modelTurn is what the wire shows of one move of the model.
type modelTurn struct {
	strategy     string // the tool L1 called
	free         []int  // the cells L2's schema allowed
	cell         int    // the cell L2 answered
	l1, l2       int    // attempts
	l1Req, l2Req map[string]any
}

// modelTurns reads the exchanges as moves of the model, failing the test
// unless every move is an L1 tools request followed by an L2 schema request,
// both answered 200.
func modelTurns(t *testing.T, xs []exchange) []modelTurn {
	t.Helper()
	if len(xs)%2 != 0 {
		t.Fatalf("%d requests: not pairs of L1 and L2", len(xs))
	}
	var turns []modelTurn
	for i := 0; i < len(xs); i += 2 {
		l1, l2 := xs[i], xs[i+1]
		if l1.path != "/v1/sample/tools" || l2.path != "/v1/sample/schema" || l1.status != 200 || l2.status != 200 {
			t.Fatalf("move %d: %s (%d) then %s (%d), want /v1/sample/tools then /v1/sample/schema, both 200",
				i/2+1, l1.path, l1.status, l2.path, l2.status)
		}
		var tr modelTurn
		var (
			toolsRes struct {
				Attempts  int
				ToolCalls []struct{ Name string }
			}
			schemaReq struct {
				Schema struct {
					Properties struct {
						Cell struct{ Enum []int }
					}
				}
			}
			schemaRes struct {
				Attempts int
				Parsed   struct{ Cell int }
			}
		)
		for _, d := range []struct {
			b []byte
			v any
		}{{l1.res, &toolsRes}, {l2.req, &schemaReq}, {l2.res, &schemaRes}, {l1.req, &tr.l1Req}, {l2.req, &tr.l2Req}} {
			if err := json.Unmarshal(d.b, d.v); err != nil {
				t.Fatalf("move %d: %v in %s", i/2+1, err, d.b)
			}
		}
		if len(toolsRes.ToolCalls) == 0 {
			t.Fatalf("move %d: no tool call in %s", i/2+1, l1.res)
		}
		tr.strategy, tr.l1 = toolsRes.ToolCalls[0].Name, toolsRes.Attempts
		tr.free, tr.cell, tr.l2 = schemaReq.Schema.Properties.Cell.Enum, schemaRes.Parsed.Cell, schemaRes.Attempts
		turns = append(turns, tr)
	}
	return turns
}

// boardRow is a row of a printed board.
var boardRow = regexp.MustCompile(`(?m)^ (.) \| (.) \| (.)$`)

// lastBoard reads the last board the game printed.
func lastBoard(t *testing.T, out string) board {
	t.Helper()
	rows := boardRow.FindAllStringSubmatch(out, -1)
	if len(rows) < 3 {
		t.Fatalf("no board in the output:\n%s", out)
	}
	var b board
	for i, row := range rows[len(rows)-3:] {
		for j, s := range row[1:] {
			if s == "X" || s == "O" {
				b[i*3+j] = s[0]
			}
		}
	}
	return b
}

// replay plays the game again from what the wire shows of the model's
// moves, checking each against the rules and the contract of play_ttt:
// L2 offered exactly the free cells, the model's cell was one of them.
// The person's moves are the cells that left the free ones between two
// moves of the model (first-free: the lowest free cell), the last one read
// from the final board printed. It returns the final board and the winner.
func replay(t *testing.T, turns []modelTurn, final board, firstFree bool) (board, byte) {
	t.Helper()
	if len(turns) == 0 {
		t.Fatal("the model never moved")
	}
	modelMark := byte('O')
	if len(turns[0].free) == 9 {
		modelMark = 'X'
	}
	var b board
	mark, next := byte('X'), 0
	for b.winner() == 0 && len(b.free()) > 0 {
		free := b.free()
		switch {
		case mark == modelMark:
			if next == len(turns) {
				t.Fatalf("the game goes on, but the model made no more moves; board:\n%s", b.String())
			}
			tr := turns[next]
			next++
			if diff := cmp.Diff(free, tr.free); diff != "" {
				t.Fatalf("move %d of the model: L2 allowed other cells than the free ones (-free +allowed):\n%s", next, diff)
			}
			if !slices.Contains(free, tr.cell) {
				t.Fatalf("move %d of the model: cell %d is not free (%v)", next, tr.cell, free)
			}
			if tr.strategy != "play_offensive" && tr.strategy != "play_defensive" {
				t.Fatalf("move %d of the model: strategy %q", next, tr.strategy)
			}
			_ = b.mark(tr.cell, mark)
		case firstFree:
			_ = b.mark(free[0], mark)
		default:
			var gone []int
			later := final.free()
			if next < len(turns) {
				later = turns[next].free
			}
			for _, c := range free {
				if !slices.Contains(later, c) {
					gone = append(gone, c)
				}
			}
			if len(gone) != 1 {
				t.Fatalf("the person's move: cells %v were taken, want one", gone)
			}
			_ = b.mark(gone[0], mark)
		}
		mark = other(mark)
	}
	if next != len(turns) {
		t.Fatalf("the game was over after %d moves of the model, but it made %d", next, len(turns))
	}
	if b != final {
		t.Fatalf("the final board printed:\n%swant:\n%s", final.String(), b.String())
	}
	return b, modelMark
}

func TestGamesToTheEnd(t *testing.T) {
	marks := map[byte]int{} // the model's, over the games
	for _, model := range []string{"offline/default", "offline/flaky"} {
		wantAttempts := map[string]int{"offline/default": 1, "offline/flaky": 2}[model]
		for _, opponent := range []string{"first-free", "random"} {
			for _, seed := range []int{1, 2, 6, 7} { // the model plays O, O, X, X
				t.Run(fmt.Sprintf("%s/%s/seed %d", model, opponent, seed), func(t *testing.T) {
					var w wire
					srv := service(t, w.wrap)
					var out bytes.Buffer
					args := []string{"-url", srv.URL, "-model", model, "-opponent", opponent, "-seed", fmt.Sprint(seed)}
					if err := run(context.Background(), args, strings.NewReader(""), &out, io.Discard); err != nil {
						t.Fatalf("run: %v\n%s", err, out.String())
					}
					turns := modelTurns(t, w.exchanges())
					b, modelMark := replay(t, turns, lastBoard(t, out.String()), opponent == "first-free")
					marks[modelMark]++
					for i, tr := range turns {
						if tr.l1 != wantAttempts || tr.l2 != wantAttempts {
							t.Errorf("move %d: L1 took %d attempts, L2 %d, want %d", i+1, tr.l1, tr.l2, wantAttempts)
						}
						if tr.l1Req["model"] != model || tr.l2Req["model"] != model {
							t.Errorf("move %d: models %v and %v", i+1, tr.l1Req["model"], tr.l2Req["model"])
						}
					}
					var want string
					switch wm := b.winner(); wm {
					case 0:
						want = "Draw."
					case modelMark:
						want = fmt.Sprintf("%c wins: the model wins.", wm)
					default:
						want = fmt.Sprintf("%c wins: the person (%s) wins.", wm, opponent)
					}
					if got := strings.TrimSpace(out.String()); !strings.HasSuffix(got, want) {
						t.Errorf("the game ends with %q, want %q:\n%s", got[max(0, len(got)-60):], want, got)
					}
					if !strings.Contains(out.String(), fmt.Sprintf("the model (%s) plays %c", model, modelMark)) {
						t.Errorf("the marks are not announced:\n%s", out.String())
					}
					if n := strings.Count(out.String(), fmt.Sprintf("(%d attempt", wantAttempts)); n != 2*len(turns) {
						t.Errorf("%d lines report %d attempts, want %d", n, wantAttempts, 2*len(turns))
					}
				})
			}
		}
	}
	if marks['X'] == 0 || marks['O'] == 0 {
		t.Errorf("the model played X %d times and O %d times: the seeds should cover both", marks['X'], marks['O'])
	}
}

func TestAPersonAtTheTerminal(t *testing.T) {
	var w wire
	srv := service(t, w.wrap)
	tests := []struct {
		name    string
		seed    string
		input   string
		wantOut []string
		wantErr error
	}{
		// The model plays X and takes 1 first; the person tries 1, then 2,
		// and so on, and a word.
		{"moves, some refused", "7", "one\n1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			[]string{`"one" is not a free cell.`, `"1" is not a free cell.`, "Your move (O), one of 2, 3, 4, 5, 6, 7, 8, 9: ", "  O on 2\n"}, nil},
		// The person plays X and has nothing to say.
		{"no input", "1", "", []string{"Your move (X), one of 1, 2, 3, 4, 5, 6, 7, 8, 9: \n"}, errNoInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), []string{"-url", srv.URL, "-seed", tt.seed}, strings.NewReader(tt.input), &out, io.Discard)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("run: %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output lacks %q:\n%s", s, out.String())
				}
			}
			if tt.wantErr == nil && !strings.Contains(out.String(), " wins: ") && !strings.Contains(out.String(), "Draw.") {
				t.Errorf("the game did not end:\n%s", out.String())
			}
		})
	}
}

// TestCancelEndsTheRequestInFlight cancels the game (as Ctrl-C does) while
// the service answers the model's first request: the request is cancelled
// on the service's side and the game ends with the context's error.
func TestCancelEndsTheRequestInFlight(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := service(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() {
				// net/http notices a client gone once the body is read.
				_, _ = io.ReadAll(r.Body)
				close(arrived)
				<-r.Context().Done()
				close(gone)
			})
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	var out bytes.Buffer
	err := run(ctx, []string{"-url", srv.URL, "-seed", "7"}, strings.NewReader(""), &out, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want context.Canceled", err)
	}
	<-gone
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-opponent", "smart"}, `-opponent "smart": want random or first-free`},
		{[]string{"-url", "localhost:8080"}, "base URL"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := run(context.Background(), tt.args, strings.NewReader(""), &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}
