package tools

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits of the calculator, so that no input can exhaust the stack or
// take long.
const (
	maxExprLen   = 4096
	maxExprDepth = 64
)

// errDivisionByZero is the error of x / 0 and x % 0.
var errDivisionByZero = errors.New("division by zero")

// calculate evaluates an arithmetic expression: decimal numbers, + - * / %
// (remainder, with the sign of the dividend), ^ (power, right-associative,
// binding tighter than unary minus: -2^2 is -4), unary minus and plus, and
// parentheses. A result that is not a finite number is an error.
//
// Grammar:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ "^" unary ]
//	primary = number | "(" expr ")"
func calculate(expr string) (float64, error) {
	if len(expr) > maxExprLen {
		return 0, fmt.Errorf("expression is longer than %d characters", maxExprLen)
	}
	p := &calcParser{src: expr}
	p.skipSpace()
	if p.pos == len(p.src) {
		return 0, errors.New("expression is empty")
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if p.pos < len(p.src) {
		return 0, p.errorf("unexpected %q", p.src[p.pos])
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// calcParser is a recursive-descent parser that evaluates as it goes.
type calcParser struct {
	src   string
	pos   int // next byte to read; spaces before it are skipped
	depth int
}

func (p *calcParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at position %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

func (p *calcParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// accept consumes c if it is next.
func (p *calcParser) accept(c byte) bool {
	if p.pos < len(p.src) && p.src[p.pos] == c {
		p.pos++
		p.skipSpace()
		return true
	}
	return false
}

// enter bounds the nesting of parentheses and unary operators.
func (p *calcParser) enter() error {
	p.depth++
	if p.depth > maxExprDepth {
		return p.errorf("expression is nested more than %d levels deep", maxExprDepth)
	}
	return nil
}

func (p *calcParser) expr() (float64, error) { return p.binary("+-", p.term) }

func (p *calcParser) term() (float64, error) { return p.binary("*/%", p.unary) }

// binary parses operands joined by the left-associative operators ops.
func (p *calcParser) binary(ops string, operand func() (float64, error)) (float64, error) {
	v, err := operand()
	for err == nil && p.pos < len(p.src) && strings.IndexByte(ops, p.src[p.pos]) >= 0 {
		op := p.src[p.pos]
		p.accept(op)
		var w float64
		if w, err = operand(); err == nil {
			v, err = apply(op, v, w)
		}
	}
	return v, err
}

// apply applies the binary operator op.
func apply(op byte, v, w float64) (float64, error) {
	switch {
	case op == '+':
		return v + w, nil
	case op == '-':
		return v - w, nil
	case op == '*':
		return v * w, nil
	case w == 0:
		return 0, errDivisionByZero
	case op == '/':
		return v / w, nil
	}
	return math.Mod(v, w), nil
}

func (p *calcParser) unary() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	switch {
	case p.accept('-'):
		v, err := p.unary()
		return -v, err
	case p.accept('+'):
		return p.unary()
	}
	return p.power()
}

func (p *calcParser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.accept('^') {
		return base, nil
	}
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *calcParser) primary() (float64, error) {
	if p.pos == len(p.src) {
		return 0, p.errorf("unexpected end of expression")
	}
	if p.accept('(') {
		if err := p.enter(); err != nil {
			return 0, err
		}
		v, err := p.expr()
		p.depth--
		if err != nil {
			return 0, err
		}
		if !p.accept(')') {
			if p.pos == len(p.src) {
				return 0, p.errorf("missing )")
			}
			return 0, p.errorf("want ), got %q", p.src[p.pos])
		}
		return v, nil
	}
	start := p.pos
	digits, dot := 0, false
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && !dot {
			dot = true
		} else {
			break
		}
		p.pos++
	}
	if digits == 0 {
		p.pos = start
		return 0, p.errorf("want a number or (, got %q", p.src[p.pos])
	}
	num := p.src[start:p.pos]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		p.pos = start
		return 0, p.errorf("bad number %q", num)
	}
	p.skipSpace()
	return v, nil
}
