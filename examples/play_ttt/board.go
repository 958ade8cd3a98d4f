package main

import (
	"fmt"
	"strconv"
	"strings"
)

// board is a tic-tac-toe board: cells 1 to 9, left to right and top to
// bottom, at indexes 0 to 8; a cell holds 'X', 'O' or 0 when free.
type board [9]byte

// lines are the cells of the eight lines that win.
var lines = [8][3]int{
	{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, // rows
	{1, 4, 7}, {2, 5, 8}, {3, 6, 9}, // columns
	{1, 5, 9}, {3, 5, 7}, // diagonals
}

// free returns the free cells in increasing order.
func (b *board) free() []int {
	var out []int
	for i, c := range b {
		if c == 0 {
			out = append(out, i+1)
		}
	}
	return out
}

// at returns the mark of cell (1 to 9).
func (b *board) at(cell int) byte { return b[cell-1] }

// mark puts m on cell, which must be free.
func (b *board) mark(cell int, m byte) error {
	if cell < 1 || cell > 9 {
		return fmt.Errorf("cell %d is not on the board (1 to 9)", cell)
	}
	if b[cell-1] != 0 {
		return fmt.Errorf("cell %d is taken by %c", cell, b[cell-1])
	}
	b[cell-1] = m
	return nil
}

// winner returns the mark that holds a whole line, or 0.
func (b *board) winner() byte {
	for _, l := range lines {
		if m := b.at(l[0]); m != 0 && m == b.at(l[1]) && m == b.at(l[2]) {
			return m
		}
	}
	return 0
}

// threats returns the lines where m holds two cells and the third is free,
// with that free cell: where m wins with its next move.
func (b *board) threats(m byte) (out []threat) {
	for _, l := range lines {
		mine, free := 0, 0
		for _, c := range l {
			switch b.at(c) {
			case m:
				mine++
			case 0:
				free = c
			}
		}
		if mine == 2 && free != 0 {
			out = append(out, threat{line: l, cell: free})
		}
	}
	return out
}

// threat is a line one mark from complete.
type threat struct {
	line [3]int
	cell int // the free cell of the line
}

func (t threat) String() string {
	return fmt.Sprintf("line %d-%d-%d, completed at cell %d", t.line[0], t.line[1], t.line[2], t.cell)
}

// String draws the board, free cells showing their number.
func (b *board) String() string {
	var s strings.Builder
	for row := range 3 {
		if row > 0 {
			s.WriteString("---+---+---\n")
		}
		for col := range 3 {
			cell := row*3 + col + 1
			if col > 0 {
				s.WriteString(" |")
			}
			mark := strconv.Itoa(cell)
			if m := b.at(cell); m != 0 {
				mark = string(m)
			}
			s.WriteString(" " + mark)
		}
		s.WriteByte('\n')
	}
	return s.String()
}

// other returns the opponent's mark.
func other(m byte) byte {
	if m == 'X' {
		return 'O'
	}
	return 'X'
}
