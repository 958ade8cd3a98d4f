package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestSoak runs the soak for a few seconds against the built sampled:
// every operation answered, every stream whole, a line per second. Growth
// over so short a run says nothing; TestSoakProblems checks its verdict.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sampled and runs traffic for seconds")
	}
	var out bytes.Buffer
	rep, err := soak(t.Context(), soakOptions{d: 3 * time.Second, rate: 50}, t.TempDir(), &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.ops < 100 || rep.lost != 0 || rep.broken != 0 {
		t.Errorf("%d operations, %d lost, %d broken streams, want 100 or more and none lost or broken; first failures: %q",
			rep.ops, rep.lost, rep.broken, rep.errs)
	}
	if len(rep.samples) != 3 || strings.Count(out.String(), " rss ") != 3 {
		t.Errorf("%d samples, want 3, one printed each second", len(rep.samples))
	}
	for _, s := range rep.samples {
		if s.rss <= 0 || s.goroutines <= 0 || s.fds <= 0 || s.p50 <= 0 || s.p99 < s.p50 {
			t.Errorf("sample %+v: want every measure positive and p99 >= p50", s)
		}
	}
}

func TestSoakProblems(t *testing.T) {
	flat := func(n int) []soakSample {
		var s []soakSample
		for i := range n {
			s = append(s, soakSample{at: time.Duration(i+1) * time.Minute, rss: 40e6, goroutines: 60, fds: 20,
				p50: 21 * time.Millisecond, p99: time.Second})
		}
		return s
	}
	// short is samples 6 s apart after the warm-up, with these goroutines'
	// floors, as a 3-minute soak takes them.
	short := func(goroutines ...int) []soakSample {
		var s []soakSample
		for i, g := range goroutines {
			s = append(s, soakSample{at: 5*time.Minute + time.Duration(i+1)*6*time.Second, rss: 40e6, goroutines: g, fds: 20,
				p50: 21 * time.Millisecond, p99: time.Second})
		}
		return s
	}
	grow := func(f func(*soakSample, float64)) []soakSample {
		s := flat(60)
		for i := range s {
			f(&s[i], 1+float64(i)/200) // +30 % over the hour
		}
		return s
	}
	for _, tc := range []struct {
		name string
		rep  soakReport
		want []string // substrings, one per problem
	}{
		{"flat", soakReport{samples: flat(60), ops: 1000}, nil},
		{"growth in the warm-up only", soakReport{samples: func() []soakSample {
			s := flat(60)
			s[0].rss, s[1].rss, s[2].rss, s[3].rss = 10e6, 20e6, 30e6, 35e6 // before 5 min
			return s
		}()}, nil},
		{"one spike", soakReport{samples: func() []soakSample {
			s := flat(60)
			s[59].goroutines = 90
			return s
		}()}, nil},
		{"leak", soakReport{samples: grow(func(s *soakSample, f float64) { s.rss = int64(float64(s.rss) * f) })}, []string{"RSS grew"}},
		{"goroutines and files", soakReport{samples: grow(func(s *soakSample, f float64) {
			s.goroutines, s.fds = int(float64(s.goroutines)*f), int(float64(s.fds)*f)
		})}, []string{"goroutines grew", "open files grew"}},
		{"latency", soakReport{samples: grow(func(s *soakSample, f float64) {
			s.p50, s.p99 = time.Duration(float64(s.p50)*f), time.Duration(float64(s.p99)*f)
		})}, []string{"p50 grew", "p99 grew"}},
		// The goroutines' floors of a 3-minute soak in CI, one sample every
		// 6 s, nothing growing: the last quarter's median is 12 % over the
		// first's, within the first quarter's own range.
		{"noise within its range", soakReport{samples: short(159, 161, 152, 182, 159, 155, 160, 157, 161, 153, 153, 163,
			181, 169, 170, 170, 179, 178, 179, 165, 183, 168)}, nil},
		{"a short leak", soakReport{samples: short(159, 161, 152, 182, 159, 155, 160, 157, 161, 153, 153, 163,
			181, 169, 170, 170, 179, 188, 190, 192, 194, 196)}, []string{"goroutines grew"}},
		{"lost", soakReport{samples: flat(60), ops: 1000, lost: 1}, []string{"1 of 1000 operations lost"}},
		{"broken", soakReport{samples: flat(60), broken: 2}, []string{"2 event streams"}},
		{"too short", soakReport{samples: flat(5)}, []string{"too few samples"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.rep.problems(5 * time.Minute)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d is %q, want it to hold %q", i, got[i], w)
				}
			}
		})
	}
}

// TestSoakUpstreamFaultsFirstTries: a body seen before (sampled's retry of
// a failed try) is never failed, so that every request can succeed.
func TestSoakUpstreamFaultsFirstTries(t *testing.T) {
	f := &soakUpstream{seen: map[[32]byte]bool{}}
	a, b := []byte(`{"n":1}`), []byte(`{"n":2}`)
	if !f.first(a) || f.first(a) || !f.first(b) || f.first(a) {
		t.Error("first: want true for a new body only")
	}
}
