// Command play_ttt plays tic-tac-toe between a model behind sampled and a
// person, on the Go client (github.com/sampled/sampled/client).
//
// Marks are given at random (-seed makes a game reproducible); X begins.
// Each move of the model takes two requests: L1, SampleTools with the
// tools play_offensive {reasoning} and play_defensive {threat}, picks a
// strategy (the service guarantees a valid tool call); L2, SampleSchema
// with a schema whose cell is one of the free cells, picks the move (the
// service guarantees a legal cell). Both print what came back and how many
// attempts it took. The person types cell numbers, or -opponent plays for
// them. Ctrl-C cancels the request in flight and ends the game.
//
// With the service running (go run ./cmd/server):
//
//	go run ./examples/play_ttt
//	go run ./examples/play_ttt -opponent random -model offline/flaky
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sampled/sampled/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		// flag printed the usage.
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "play_ttt: game cancelled")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "play_ttt:", err)
		os.Exit(1)
	}
}

// run plays one game with the flags of args, reading the person's moves
// from stdin and writing the game to stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("play_ttt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "the sampled service")
	model := fs.String("model", "", "the model, as sampled names it (e.g. offline/flaky); empty means the service's default")
	seed := fs.Uint64("seed", 0, "seeds the choice of marks and the random opponent; 0 picks a seed")
	opponent := fs.String("opponent", "", "plays for the person: random or first-free; empty reads moves from the terminal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the reading of stdin
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(*seed, 0))

	c, err := client.New(*url, client.WithUserAgent("play_ttt"))
	if err != nil {
		return err
	}
	model0, err := newModelPlayer(c, *model, stdout)
	if err != nil {
		return err
	}
	var person player
	switch *opponent {
	case "random":
		person = randomPlayer{rng: rng}
	case "first-free":
		person = firstFreePlayer{}
	case "":
		person = humanPlayer{lines: readLines(ctx, stdin), out: stdout}
	default:
		return fmt.Errorf("-opponent %q: want random or first-free", *opponent)
	}

	modelMark := byte('X')
	if rng.IntN(2) == 1 {
		modelMark = 'O'
	}
	g := &game{players: map[byte]player{modelMark: model0, other(modelMark): person}, out: stdout}
	shown := *model
	if shown == "" {
		shown = "the service's default"
	}
	fmt.Fprintf(stdout, "play_ttt (seed %d): the model (%s) plays %c, %s %c. X begins.\n",
		*seed, shown, modelMark, person.name(), other(modelMark))
	w, err := g.play(ctx)
	if err != nil {
		return err
	}
	switch w {
	case 0:
		fmt.Fprintln(stdout, "\nDraw.")
	case modelMark:
		fmt.Fprintf(stdout, "\n%c wins: the model wins.\n", w)
	case other(modelMark):
		if _, human := person.(humanPlayer); human {
			fmt.Fprintf(stdout, "\n%c wins: you win.\n", w)
		} else {
			fmt.Fprintf(stdout, "\n%c wins: %s wins.\n", w, person.name())
		}
	}
	return nil
}

// readLines sends the lines of r on the channel it returns, which it closes
// at the end of r. It stops sending when ctx ends (a read in progress still
// waits for its line).
func readLines(ctx context.Context, r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
