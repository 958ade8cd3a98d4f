// Package access decides who is calling and how much they may ask: the set
// of API keys (kept as SHA-256 digests, compared in constant time), each
// key's request rate and concurrent loops, and the global cap on in-flight
// sampling requests.
//
// A Guard without keys lets everyone in as the anonymous caller, with no
// per-caller limits: the service as it runs for local use. The global cap
// applies either way.
//
// Each key's rate and loops are counted in this process, or, given
// SharedLimits (RedisLimits), where every replica sees them. The global cap
// is always this process's own: it protects this replica's resources.
package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
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
	// TokensPerMinute, USDPerDay and USDPerMonth override the Options'
	// budgets for this key when positive.
	TokensPerMinute int
	USDPerDay       float64
	USDPerMonth     float64
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
	// TokensPerMinute is each key's rate of tokens (input and output), and
	// USDPerDay and USDPerMonth its spend in a UTC day and month, unless
	// the key sets its own (Guard.Reserve).
	TokensPerMinute int
	USDPerDay       float64
	USDPerMonth     float64
	// InFlightSamples caps the sampling requests served at once, by all
	// callers together.
	InFlightSamples int
	// Shared, when set, counts each key's requests and loops where every
	// replica sees them; nil counts them in this process.
	Shared SharedLimits
	// Budgets, when set, count each key's tokens and spend where every
	// replica sees them; nil counts them in this process.
	Budgets SharedBudgets
	// Unchecked is called, with LimitRequests, LimitLoops, LimitTokens or
	// LimitBudget, for each request, loop or sampling call let in because
	// Shared or Budgets failed; it may be nil.
	Unchecked func(limit string)
	// Logger gets a warning, at most every LogEvery, while Shared fails;
	// nil discards.
	Logger *slog.Logger
}

// SharedLimits count each key's requests and loops for several replicas.
// A Guard lets in what it cannot check (an error): limits fail open, so
// that an unreachable store does not stop the service.
type SharedLimits interface {
	// Allow takes one request from the key's rate of perMinute a minute
	// with the given burst; refused, it says how long until one would be
	// allowed.
	Allow(ctx context.Context, key string, perMinute, burst int) (ok bool, wait time.Duration, err error)
	// StartLoop counts a loop of the key unless maxLoops are running. When
	// the loop counts (or with an error, when it may), release removes it
	// and may be called more than once.
	StartLoop(ctx context.Context, key string, maxLoops int) (release func(), ok bool, err error)
}

// The limits a Guard names to Options.Unchecked.
const (
	LimitRequests = "requests"
	LimitLoops    = "loops"
)

// LogEvery is how often a Guard logs, at most, that its shared limits
// fail.
const LogEvery = 10 * time.Second

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
	g       *Guard // the Guard of the caller's limits
	name    string
	limiter *rate.Limiter // nil: no rate limit
	rpm     int           // the rate of limiter, for SharedLimits
	burst   int
	loops   atomic.Int64
	maxLoop int64 // 0: no limit

	tpm       int           // tokens per minute; 0: no limit
	perToken  time.Duration // minute/tpm: how long a token stays in use
	dayNano   int64         // spend limits in billionths of a dollar; 0: none
	monthNano int64
	budget    localBudget // the budget's state without shared budgets
}

// Name is the key's configured name; "" for the anonymous caller.
func (c *Caller) Name() string {
	if c == nil {
		return "" // no caller: the service has no access guard
	}
	return c.name
}

// Guard holds the key set and the limits. It is safe for concurrent use.
type Guard struct {
	keys     []Digest  // keys[i] is callers[i]'s digest
	callers  []*Caller // one per key
	anon     *Caller   // the caller of a Guard without keys
	inFlight atomic.Int64
	maxInFl  int64
	now      func() time.Time

	shared    SharedLimits
	budgets   SharedBudgets
	unchecked func(limit string)
	log       *slog.Logger
	lastLog   atomic.Int64 // unix nanoseconds of the last warning that shared limits fail
	vouched   sync.Map     // token → *Caller (Vouch)
}

// New checks the options and returns a Guard.
func New(o Options) (*Guard, error) {
	g := &Guard{maxInFl: int64(o.InFlightSamples), now: time.Now,
		shared: o.Shared, budgets: o.Budgets, unchecked: o.Unchecked, log: o.Logger}
	g.anon = &Caller{g: g}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if o.RequestsPerMinute < 0 || o.ConcurrentLoops < 0 || o.InFlightSamples < 0 || o.TokensPerMinute < 0 ||
		!validUSD(o.USDPerDay) || !validUSD(o.USDPerMonth) {
		return nil, errors.New("access: limits must not be negative")
	}
	names := map[string]bool{}
	for i, k := range o.Keys {
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("access: key %d has no name", i)
		case names[k.Name]:
			return nil, fmt.Errorf("access: key name %q is used twice", k.Name)
		case k.RequestsPerMinute < 0 || k.ConcurrentLoops < 0 || k.TokensPerMinute < 0 || !validUSD(k.USDPerDay) || !validUSD(k.USDPerMonth):
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
		c := &Caller{g: g, name: k.Name, maxLoop: int64(loops)}
		c.setBudgets(cmp.Or(k.TokensPerMinute, o.TokensPerMinute), cmp.Or(k.USDPerDay, o.USDPerDay), cmp.Or(k.USDPerMonth, o.USDPerMonth))
		if rpm > 0 {
			// The rate is the key's requests per minute; a burst of a
			// tenth of a minute's worth lets clients send a few requests at
			// once without pacing them.
			c.rpm, c.burst = rpm, max(1, rpm/10)
			c.limiter = rate.NewLimiter(rate.Limit(float64(rpm)/60), c.burst)
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
// returns false and how long until a request would be allowed. With shared
// limits that fail (within their timeout), the request is allowed.
func (g *Guard) Allow(ctx context.Context, c *Caller) (bool, time.Duration) {
	if c.limiter == nil {
		return true, 0
	}
	if g.shared != nil {
		ok, wait, err := g.shared.Allow(ctx, c.name, c.rpm, c.burst)
		if err != nil {
			g.failed(ctx, LimitRequests, c, err)
			return true, 0
		}
		return ok, wait
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
// the loop has ended (or failed to start). With shared limits that fail
// (within their timeout), the loop is let in.
func (g *Guard) StartLoop(ctx context.Context, c *Caller) (release func(), ok bool, retryAfter time.Duration) {
	if g.shared != nil && c.maxLoop > 0 {
		rel, ok, err := g.shared.StartLoop(ctx, c.name, int(c.maxLoop))
		if err != nil {
			g.failed(ctx, LimitLoops, c, err)
			ok = true
		}
		if !ok {
			return nil, false, loopRetryAfter
		}
		c.loops.Add(1)
		return once(func() {
			c.loops.Add(-1)
			if rel != nil {
				rel()
			}
		}), true, 0
	}
	n := c.loops.Add(1)
	if c.maxLoop > 0 && n > c.maxLoop {
		c.loops.Add(-1)
		return nil, false, loopRetryAfter
	}
	return once(func() { c.loops.Add(-1) }), true, 0
}

// Loops is how many loops the caller has running on this replica.
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

// failed records a shared limit check that failed and let its request in:
// counted, and logged at most every LogEvery. A check that failed because
// the request itself ended is neither.
func (g *Guard) failed(ctx context.Context, limit string, c *Caller, err error) {
	if ctx.Err() != nil {
		return
	}
	if g.unchecked != nil {
		g.unchecked(limit)
	}
	g.warn(limit, c, err)
}

// warn logs that shared limits fail, at most every LogEvery.
func (g *Guard) warn(limit string, c *Caller, err error) {
	now, last := g.now().UnixNano(), g.lastLog.Load()
	if now-last >= int64(LogEvery) && g.lastLog.CompareAndSwap(last, now) {
		g.log.Warn("shared limits do not answer: requests, loops and sampling calls are let in unchecked, usage may go uncounted (limits fail open)",
			"limit", limit, "key", c.name, "err", err)
	}
}

// once makes f safe to call more than once: it runs the first time only.
func once(f func()) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			f()
		}
	}
}

// callerKey is the context key of NewContext and WithSeat.
type callerKey struct{}

// NewContext returns ctx carrying the request's caller, for the code
// below the handlers that counts by key name (the cost of upstream calls).
func NewContext(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, &Seat{c: c})
}

// Seat is the place of a request's caller in its context, put there
// before the caller is known and filled once it is: the request need not
// be copied (a copy would lose what the router sets on it).
type Seat struct{ c *Caller }

// Set seats the caller. It must happen before the context is handed to
// other goroutines.
func (s *Seat) Set(c *Caller) { s.c = c }

// WithSeat returns ctx carrying the seat.
func WithSeat(ctx context.Context, s *Seat) context.Context {
	return context.WithValue(ctx, callerKey{}, s)
}

// FromContext returns the caller of ctx (NewContext's, or a seat's), or
// nil.
func FromContext(ctx context.Context) *Caller {
	if s, _ := ctx.Value(callerKey{}).(*Seat); s != nil {
		return s.c
	}
	return nil
}

// validUSD reports whether v is a dollar amount a limit may be: not
// negative, not NaN, finite.
func validUSD(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
