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
// multipleOf (and of 1 for integers): 0 when allowed, else the value
// nearest to 0. Variants step away from it.
func (g *generator) genNumber(v *view, integer bool, st state) ([]byte, bool) {
	var step *big.Rat
	if integer {
		step = big.NewRat(1, 1)
	}
	for _, m := range v.mults {
		if step == nil {
			step = new(big.Rat).Set(m)
		} else {
			step = ratLCM(step, m)
		}
	}
	var r *big.Rat
	var ok bool
	if step != nil {
		r, ok = steppedNumber(v, step, st.variant)
	} else {
		r, ok = continuousNumber(v, st.variant)
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
	gac := new(big.Int).GCD(nil, nil, a, c)
	l := new(big.Int).Mul(a, c)
	l.Quo(l, gac)
	gbd := new(big.Int).GCD(nil, nil, b, d)
	return new(big.Rat).SetFrac(l, gbd)
}

// floorDiv returns floor(x / step) for a positive step.
func floorDiv(x, step *big.Rat) *big.Int {
	q := new(big.Rat).Quo(x, step)
	return new(big.Int).Div(q.Num(), q.Denom()) // Euclidean: floor for positive divisor
}

func steppedNumber(v *view, step *big.Rat, variant int) (*big.Rat, bool) {
	var kLo, kHi *big.Int
	if v.lo != nil {
		// ceil(lo/step) = -floor(-lo/step)
		kLo = new(big.Int).Neg(floorDiv(new(big.Rat).Neg(v.lo), step))
		if v.loExcl && new(big.Rat).Mul(new(big.Rat).SetInt(kLo), step).Cmp(v.lo) == 0 {
			kLo.Add(kLo, big.NewInt(1))
		}
	}
	if v.hi != nil {
		kHi = floorDiv(v.hi, step)
		if v.hiExcl && new(big.Rat).Mul(new(big.Rat).SetInt(kHi), step).Cmp(v.hi) == 0 {
			kHi.Sub(kHi, big.NewInt(1))
		}
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
		over := new(big.Int).Sub(k, kHi)
		k.Sub(k0, over)
		if kLo != nil && k.Cmp(kLo) < 0 {
			k.Set(k0)
		}
	}
	return new(big.Rat).Mul(new(big.Rat).SetInt(k), step), true
}

// continuousNumber picks a number within the bounds of v, which has no
// multipleOf: a multiple of 1/2, or of a quarter of the range when the range
// holds none.
func continuousNumber(v *view, variant int) (*big.Rat, bool) {
	if r, ok := steppedNumber(v, big.NewRat(1, 2), variant); ok || v.lo == nil || v.hi == nil {
		return r, ok
	}
	width := new(big.Rat).Sub(v.hi, v.lo)
	switch width.Sign() {
	case -1:
		return nil, false
	case 0:
		return v.lo, !v.loExcl && !v.hiExcl
	}
	return steppedNumber(v, width.Quo(width, big.NewRat(4, 1)), variant)
}

// ratOf converts a JSON number to an exact rational. Numbers with huge
// exponents go through float64 so that a hostile schema cannot make the
// conversion allocate without bound.
func ratOf(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > 400 || exp < -400 {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, false
			}
			switch {
			case math.IsInf(f, 1):
				f = math.MaxFloat64
			case math.IsInf(f, -1):
				f = -math.MaxFloat64
			}
			return new(big.Rat).SetFloat64(f), true
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// formatRat writes r as a JSON number: an integer when it is one, else the
// exact decimal expansion (every rational built from JSON decimals has one).
func formatRat(r *big.Rat) json.Number {
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	d := new(big.Int).Set(r.Denom())
	var twos, fives int
	two, five, zero := big.NewInt(2), big.NewInt(5), big.NewInt(0)
	m := new(big.Int)
	for twos < 2000 {
		if m.Mod(d, two).Cmp(zero) != 0 {
			break
		}
		d.Quo(d, two)
		twos++
	}
	for fives < 2000 {
		if m.Mod(d, five).Cmp(zero) != 0 {
			break
		}
		d.Quo(d, five)
		fives++
	}
	prec := max(twos, fives)
	if d.Cmp(big.NewInt(1)) != 0 || prec > 400 {
		f, _ := r.Float64()
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	s := r.FloatString(prec)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return json.Number(s)
}
