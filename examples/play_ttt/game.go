package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sampled/sampled/client"
)

// player chooses the cell for mark on b.
type player interface {
	// name says who plays, for the transcript.
	name() string
	move(ctx context.Context, b *board, mark byte) (int, error)
}

// The arguments of the two strategy tools of the model's first step.
type (
	offensive struct {
		Reasoning string `json:"reasoning" jsonschema:"why attacking is the better move now, and which line to build"`
	}
	defensive struct {
		Threat string `json:"threat" jsonschema:"the opponent's line to block, and the cell that blocks it"`
	}
)

// strategy decodes the arguments of either tool: the tool's name says
// which member is set.
type strategy struct {
	Reasoning string `json:"reasoning,omitempty"`
	Threat    string `json:"threat,omitempty"`
}

// moveChoice is the answer of the model's second step.
type moveChoice struct {
	Cell int `json:"cell"`
}

// modelPlayer is the model behind sampled. Each move takes two requests:
// L1, SampleTools with the tools play_offensive and play_defensive, picks a
// strategy (a tool call is guaranteed); L2, SampleSchema with a schema
// whose cell is one of the free cells, picks the move (a legal cell is
// guaranteed).
type modelPlayer struct {
	c     *client.Client
	model string
	tools []client.Tool
	out   io.Writer
}

func newModelPlayer(c *client.Client, model string, out io.Writer) (*modelPlayer, error) {
	attack, err := client.ToolFor[offensive]("play_offensive", "Attack: build toward three of your own marks in a row.")
	if err != nil {
		return nil, err
	}
	defend, err := client.ToolFor[defensive]("play_defensive", "Defend: block the opponent's threat to complete three in a row.")
	if err != nil {
		return nil, err
	}
	return &modelPlayer{c: c, model: model, tools: []client.Tool{attack, defend}, out: out}, nil
}

func (p *modelPlayer) name() string { return "the model" }

func (p *modelPlayer) move(ctx context.Context, b *board, mark byte) (int, error) {
	system := fmt.Sprintf("You play tic-tac-toe as %c against a person playing %c. "+
		"The cells are numbered 1 to 9, left to right and top to bottom; a free cell shows its number.", mark, other(mark))
	situation := describe(b, mark)

	tools, err := client.SampleTools[strategy](ctx, p.c, &client.SampleRequest{
		Model:        p.model,
		Tools:        p.tools,
		SystemPrompt: system,
		Prompt: "The board:\n" + b.String() + situation +
			"\nChoose your strategy for this move: call play_offensive with your reasoning, or play_defensive naming the threat you block.",
	})
	if err != nil {
		return 0, fmt.Errorf("L1 (strategy): %w", err)
	}
	call := tools.ToolCalls[0]
	args := call.Arguments.Reasoning
	if call.Name == "play_defensive" {
		args = call.Arguments.Threat
	}
	raw, _ := json.Marshal(tools.Result.ToolCalls[0].Arguments)
	fmt.Fprintf(p.out, "  L1 sampleTools  → %s %s (%s)\n", call.Name, clip(string(raw), 70), attempts(tools.Attempts))

	free := b.free()
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"cell": map[string]any{"type": "integer", "enum": free, "description": "the free cell to mark"},
		},
		"required":             []string{"cell"},
		"additionalProperties": false,
	}
	strategyText := strings.TrimPrefix(call.Name, "play_")
	mv, err := client.SampleSchema[moveChoice](ctx, p.c, &client.SampleRequest{
		Model:        p.model,
		SystemPrompt: system,
		Prompt: "The board:\n" + b.String() + situation +
			fmt.Sprintf("\nYou chose to play %s: %s\nAnswer with the cell you mark, one of %s.", strategyText, args, joinInts(free)),
		Schema: schema,
	})
	if err != nil {
		return 0, fmt.Errorf("L2 (move): %w", err)
	}
	fmt.Fprintf(p.out, "  L2 sampleSchema → %s (%s)\n", strings.TrimSpace(string(mv.Result.Parsed)), attempts(mv.Attempts))
	return mv.Parsed.Cell, nil
}

// describe says what threatens on b, for the player of mark.
func describe(b *board, mark byte) string {
	var s strings.Builder
	for _, t := range b.threats(mark) {
		fmt.Fprintf(&s, "You can win: your %s.\n", t)
	}
	for _, t := range b.threats(other(mark)) {
		fmt.Fprintf(&s, "Threat: the opponent can win next move on %s; block it.\n", t)
	}
	if s.Len() == 0 {
		s.WriteString("There is no immediate threat: attack, build a line of your own.\n")
	}
	return s.String()
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// clip cuts s to n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// randomPlayer plays a free cell at random.
type randomPlayer struct{ rng *rand.Rand }

func (randomPlayer) name() string { return "the person (random)" }

func (p randomPlayer) move(_ context.Context, b *board, _ byte) (int, error) {
	free := b.free()
	return free[p.rng.IntN(len(free))], nil
}

// firstFreePlayer plays the free cell with the lowest number.
type firstFreePlayer struct{}

func (firstFreePlayer) name() string { return "the person (first-free)" }

func (firstFreePlayer) move(_ context.Context, b *board, _ byte) (int, error) {
	return b.free()[0], nil
}

// errNoInput ends a game whose person's input ended.
var errNoInput = errors.New("the input ended")

// humanPlayer reads the person's moves, one cell number a line.
type humanPlayer struct {
	lines <-chan string
	out   io.Writer
}

func (humanPlayer) name() string { return "you" }

func (p humanPlayer) move(ctx context.Context, b *board, mark byte) (int, error) {
	for {
		fmt.Fprintf(p.out, "Your move (%c), one of %s: ", mark, joinInts(b.free()))
		var line string
		select {
		case <-ctx.Done():
			fmt.Fprintln(p.out)
			return 0, ctx.Err()
		case l, ok := <-p.lines:
			if !ok {
				fmt.Fprintln(p.out)
				return 0, errNoInput
			}
			line = strings.TrimSpace(l)
		}
		cell, err := strconv.Atoi(line)
		if err == nil && slices.Contains(b.free(), cell) {
			return cell, nil
		}
		fmt.Fprintf(p.out, "%q is not a free cell.\n", line)
	}
}

// game is a game between the model and a person.
type game struct {
	players map[byte]player // by mark
	out     io.Writer
}

// play plays the game to its end: a win, a draw, or an error (a cancelled
// context among them). It returns the winning mark, or 0 for a draw.
func (g *game) play(ctx context.Context) (byte, error) {
	var b board
	fmt.Fprint(g.out, b.String())
	mark := byte('X')
	for turn := 1; ; turn++ {
		p := g.players[mark]
		fmt.Fprintf(g.out, "\nTurn %d: %c, %s\n", turn, mark, p.name())
		cell, err := p.move(ctx, &b, mark)
		if err != nil {
			return 0, err
		}
		if err := b.mark(cell, mark); err != nil {
			return 0, fmt.Errorf("%s played an illegal move: %w", p.name(), err)
		}
		fmt.Fprintf(g.out, "  %c on %d\n%s", mark, cell, b.String())
		if w := b.winner(); w != 0 {
			return w, nil
		}
		if len(b.free()) == 0 {
			return 0, nil
		}
		mark = other(mark)
	}
}
