// Package access decides who is calling and how much they may ask: the set
// of API keys (kept as SHA-256 digests, compared in constant time), each
// key's request rate and concurrent loops, and the global cap on in-flight
// sampling requests.
//
// A Guard without keys lets everyone in as the anonymous caller, with no
// per-caller limits: the service as it runs for local use. The global cap
// applies either way.
package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// HashPrefix starts the text form of a key's digest: "sha256:<64 hex>".
const HashPrefix = "sha256:"

// Digest is the SHA-256 of an API key.
type Digest [sha256.Size]byte

// HashKey returns the digest of an API key.
func HashKey(key string) Digest { return sha256.Sum256([]byte(key)) }

// ParseDigest reads "sha256:<64 hex digits>", as `printf %s KEY | sha256sum`
// prints the hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	h, ok := strings.CutPrefix(s, HashPrefix)
	if !ok {
		return d, fmt.Errorf("want %s followed by 64 hex digits", HashPrefix)
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(d) {
		return d, fmt.Errorf("want %s followed by 64 hex digits", HashPrefix)
	}
	copy(d[:], b)
	return d, nil
}

// String is the digest's text form.
func (d Digest) String() string { return HashPrefix + hex.EncodeToString(d[:]) }

// Key is one configured API key.
type Key struct {
	// Name is the caller's identity: what logs, metrics and run ownership
	// carry, never the key itself.
	Name string
	// Digest is the SHA-256 of the key.
	Digest Digest
	// RequestsPerMinute and ConcurrentLoops override the Options' defaults
	// for this key when positive.
	RequestsPerMinute int
	ConcurrentLoops   int
}

// Options configure a Guard. Zero limits mean no limit.
type Options struct {
	// Keys are the accepted API keys; none lets every request in as the
	// anonymous caller.
	Keys []Key
	// RequestsPerMinute is each key's request rate, unless the key sets
	// its own.
	RequestsPerMinute int
	// ConcurrentLoops is how many loops each key may have running, unless
	// the key sets its own.
	ConcurrentLoops int
	// InFlightSamples caps the sampling requests served at once, by all
	// callers together.
	InFlightSamples int
}

// Errors of Authenticate.
var (
	// ErrNoKey: the request carries no bearer token.
	ErrNoKey = errors.New("no API key: send Authorization: Bearer <key>")
	// ErrBadKey: the bearer token is not a configured key.
	ErrBadKey = errors.New("the API key is not valid")
)

// Caller is who sent a request: a configured key, or the anonymous caller
// of a Guard without keys. Its methods are safe for concurrent use.
type Caller struct {
	name    string
	limiter *rate.Limiter // nil: no rate limit
	loops   atomic.Int64
	maxLoop int64 // 0: no limit
}

// Name is the key's configured name; "" for the anonymous caller.
func (c *Caller) Name() string { return c.name }

// Guard holds the key set and the limits. It is safe for concurrent use.
type Guard struct {
	keys     []Digest  // keys[i] is callers[i]'s digest
	callers  []*Caller // one per key
	anon     *Caller   // the caller of a Guard without keys
	inFlight atomic.Int64
	maxInFl  int64
	now      func() time.Time
}

// New checks the options and returns a Guard.
func New(o Options) (*Guard, error) {
	g := &Guard{maxInFl: int64(o.InFlightSamples), now: time.Now, anon: &Caller{}}
	if o.RequestsPerMinute < 0 || o.ConcurrentLoops < 0 || o.InFlightSamples < 0 {
		return nil, errors.New("access: limits must not be negative")
	}
	names := map[string]bool{}
	for i, k := range o.Keys {
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("access: key %d has no name", i)
		case names[k.Name]:
			return nil, fmt.Errorf("access: key name %q is used twice", k.Name)
		case k.RequestsPerMinute < 0 || k.ConcurrentLoops < 0:
			return nil, fmt.Errorf("access: key %q: limits must not be negative", k.Name)
		}
		for _, d := range g.keys {
			if d == k.Digest {
				return nil, fmt.Errorf("access: key %q has the same key as another", k.Name)
			}
		}
		names[k.Name] = true
		rpm, loops := o.RequestsPerMinute, o.ConcurrentLoops
		if k.RequestsPerMinute > 0 {
			rpm = k.RequestsPerMinute
		}
		if k.ConcurrentLoops > 0 {
			loops = k.ConcurrentLoops
		}
		c := &Caller{name: k.Name, maxLoop: int64(loops)}
		if rpm > 0 {
			// The rate is the key's requests per minute; a burst of a
			// tenth of a minute's worth lets clients send a few requests at
			// once without pacing them.
			c.limiter = rate.NewLimiter(rate.Limit(float64(rpm)/60), max(1, rpm/10))
		}
		g.keys = append(g.keys, k.Digest)
		g.callers = append(g.callers, c)
	}
	return g, nil
}

// Enabled reports whether keys are configured: requests need one.
func (g *Guard) Enabled() bool { return len(g.keys) > 0 }

// Names are the configured keys' names.
func (g *Guard) Names() []string {
	out := make([]string, len(g.callers))
	for i, c := range g.callers {
		out[i] = c.name
	}
	return out
}

// Authenticate returns the caller of a request given its Authorization
// header. Without keys every request is the anonymous caller's. The key is
// hashed and compared with every configured digest in constant time, so
// neither the key nor which configured key it resembles shows in the time
// taken.
func (g *Guard) Authenticate(authorization string) (*Caller, error) {
	if !g.Enabled() {
		return g.anon, nil
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, ErrNoKey
	}
	d := HashKey(token)
	found := -1
	for i := range g.keys {
		if subtle.ConstantTimeCompare(d[:], g.keys[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, ErrBadKey
	}
	return g.callers[found], nil
}

// Allow takes one request from the caller's rate. When the rate is spent it
// returns false and how long until a request would be allowed.
func (g *Guard) Allow(c *Caller) (bool, time.Duration) {
	if c.limiter == nil {
		return true, 0
	}
	r := c.limiter.ReserveN(g.now(), 1)
	if d := r.DelayFrom(g.now()); d > 0 {
		r.CancelAt(g.now())
		return false, d
	}
	return true, 0
}

// loopRetryAfter is what a caller at its loop limit is told to wait: loops
// end at unknown times.
const loopRetryAfter = 5 * time.Second

// StartLoop counts a loop the caller starts. At the caller's limit it
// returns false and a time to wait; otherwise a release to call once when
// the loop has ended (or failed to start).
func (g *Guard) StartLoop(c *Caller) (release func(), ok bool, retryAfter time.Duration) {
	n := c.loops.Add(1)
	if c.maxLoop > 0 && n > c.maxLoop {
		c.loops.Add(-1)
		return nil, false, loopRetryAfter
	}
	return once(func() { c.loops.Add(-1) }), true, 0
}

// Loops is how many loops the caller has running.
func (c *Caller) Loops() int { return int(c.loops.Load()) }

// sampleRetryAfter is what a request over the global cap is told to wait.
const sampleRetryAfter = time.Second

// StartSample counts an in-flight sampling request against the global cap.
// Over it, it returns false and a time to wait; otherwise a release to call
// once the request is done.
func (g *Guard) StartSample() (release func(), ok bool, retryAfter time.Duration) {
	n := g.inFlight.Add(1)
	if g.maxInFl > 0 && n > g.maxInFl {
		g.inFlight.Add(-1)
		return nil, false, sampleRetryAfter
	}
	return once(func() { g.inFlight.Add(-1) }), true, 0
}

// InFlight is how many sampling requests are being served.
func (g *Guard) InFlight() int { return int(g.inFlight.Load()) }

// once makes f safe to call more than once: it runs the first time only.
func once(f func()) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			f()
		}
	}
}
