package offline

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// genNumber picks a number within the bounds of v, a multiple of every
// multipleOf (and of 1 for integers, of 1/2 for other numbers without
// multipleOf): 0 when allowed, else the value nearest to 0. Variants step
// away from it.
func genNumber(v *view, integer bool, variant int) ([]byte, bool) {
	var step *big.Rat
	switch {
	case integer:
		step = big.NewRat(1, 1)
	case len(v.mults) == 0:
		step = big.NewRat(1, 2)
	}
	for _, m := range v.mults {
		if step == nil {
			step = m
		} else {
			step = ratLCM(step, m)
		}
	}
	r, ok := steppedNumber(v, step, variant)
	if !ok && !integer && len(v.mults) == 0 && v.lo != nil && v.hi != nil {
		// No multiple of 1/2 in the range: steps of a quarter of it.
		switch width := new(big.Rat).Sub(v.hi, v.lo); width.Sign() {
		case 0:
			r, ok = v.lo, !v.loExcl && !v.hiExcl
		case 1:
			r, ok = steppedNumber(v, width.Quo(width, big.NewRat(4, 1)), variant)
		}
	}
	if !ok {
		return []byte("null"), false
	}
	return []byte(formatRat(r)), true
}

// ratLCM returns the least common multiple of two positive rationals:
// lcm(a/b, c/d) = lcm(a, c) / gcd(b, d).
func ratLCM(x, y *big.Rat) *big.Rat {
	a, b := x.Num(), x.Denom()
	c, d := y.Num(), y.Denom()
	l := new(big.Int).Mul(a, c)
	l.Quo(l, new(big.Int).GCD(nil, nil, a, c))
	return new(big.Rat).SetFrac(l, new(big.Int).GCD(nil, nil, b, d))
}

// steppedNumber returns the multiple of step within the bounds of v that is
// nearest to 0, or variant steps above it (below, past the upper bound).
func steppedNumber(v *view, step *big.Rat, variant int) (*big.Rat, bool) {
	// floor returns floor(x / step) and whether x is a multiple of step.
	floor := func(x *big.Rat) (*big.Int, bool) {
		q := new(big.Rat).Quo(x, step)
		return new(big.Int).Div(q.Num(), q.Denom()), q.IsInt() // Euclidean: floor for a positive step
	}
	one := big.NewInt(1)
	var kLo, kHi *big.Int // the bounds as multiples of step
	if v.lo != nil {
		k, exact := floor(v.lo)
		if v.loExcl || !exact {
			k.Add(k, one)
		}
		kLo = k
	}
	if v.hi != nil {
		k, exact := floor(v.hi)
		if v.hiExcl && exact {
			k.Sub(k, one)
		}
		kHi = k
	}
	if kLo != nil && kHi != nil && kLo.Cmp(kHi) > 0 {
		return nil, false
	}
	k0 := big.NewInt(0)
	if kLo != nil && k0.Cmp(kLo) < 0 {
		k0.Set(kLo)
	}
	if kHi != nil && k0.Cmp(kHi) > 0 {
		k0.Set(kHi)
	}
	k := new(big.Int).Add(k0, big.NewInt(int64(variant)))
	if kHi != nil && k.Cmp(kHi) > 0 {
		// Step downwards instead: k0 - (k - kHi).
		k.Sub(k0, k.Sub(k, kHi))
		if kLo != nil && k.Cmp(kLo) < 0 {
			k.Set(k0)
		}
	}
	return new(big.Rat).Mul(new(big.Rat).SetInt(k), step), true
}

// ratOf converts a JSON number to an exact rational. Numbers with huge
// exponents go through float64 so that a hostile schema cannot make the
// conversion allocate without bound.
func ratOf(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(s[i+1:]); err != nil || exp > 400 || exp < -400 {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, false
			}
			return new(big.Rat).SetFloat64(max(-math.MaxFloat64, min(f, math.MaxFloat64))), true
		}
	}
	return new(big.Rat).SetString(s)
}

// formatRat writes r as a JSON number: its exact decimal expansion (every
// rational built from JSON decimals has one), or the nearest float64 when
// that is longer than 400 digits after the point.
func formatRat(r *big.Rat) string {
	if prec, exact := r.FloatPrec(); exact && prec <= 400 {
		return r.FloatString(prec)
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
