package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/sampled/sampled/client"
	"github.com/sampled/sampled/internal/app"
)

// runSampled starts sampled with its offline provider on a loopback port,
// for the examples to run on their own. A program would use the address of
// a running service instead, e.g. http://127.0.0.1:8080.
func runSampled() (url string, stop func()) {
	a, err := app.New(context.Background(), app.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	return srv.URL, func() {
		srv.Close()
		_ = a.Close()
	}
}

func ExampleNew() {
	url, stop := runSampled()
	defer stop()

	c, err := client.New(url, client.WithAPIKey("sk-…"), client.WithUserAgent("my-tool/1.0"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Sample(context.Background(), &client.SampleRequest{Prompt: "Say hello."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Provider, res.StopReason)
	// Output: offline endTurn
}

func ExampleClient_Sample() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	res, err := c.Sample(context.Background(), &client.SampleRequest{
		SystemPrompt: "You are terse.",
		Prompt:       "Name three primary colours.",
		MaxTokens:    100,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	fmt.Println(res.StopReason, res.Attempts)
	// Output:
	// [offline] You said: "Name three primary colours."
	// endTurn 1
}

func ExampleSampleSchema() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	// The schema sent is derived from Person: name and age are required,
	// no other member is allowed.
	type Person struct {
		Name string `json:"name" jsonschema:"the person's full name"`
		Age  int    `json:"age"`
	}
	// offline/flaky answers the first attempt with broken JSON: the
	// service asks again with the errors, and the second answer validates.
	res, err := client.SampleSchema[Person](context.Background(), c, &client.SampleRequest{
		Prompt: "Invent a person.",
		Model:  "offline/flaky",
	})
	if err != nil {
		log.Fatal(err)
	}
	var p Person = res.Parsed
	fmt.Println("attempts:", res.Attempts)
	fmt.Println("has a name:", p.Name != "")
	// Output:
	// attempts: 2
	// has a name: true
}

func ExampleSampleSchema_explicitSchema() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	// A schema passed explicitly constrains more than a Go type can: here
	// the cell must be one of the free ones.
	type Move struct {
		Cell int `json:"cell"`
	}
	res, err := client.SampleSchema[Move](context.Background(), c, &client.SampleRequest{
		Prompt: "Your move.",
		Schema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"cell": map[string]any{"type": "integer", "enum": []int{7}}},
			"required":             []string{"cell"},
			"additionalProperties": false,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cell", res.Parsed.Cell)
	// Output: cell 7
}

func ExampleSampleTools() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	type City struct {
		City string `json:"city" jsonschema:"the city's name"`
	}
	weather, err := client.ToolFor[City]("get_weather", "Get the current weather of a city")
	if err != nil {
		log.Fatal(err)
	}
	// offline/flaky answers the first attempt without a tool call; the
	// service asks again.
	res, err := client.SampleTools[City](context.Background(), c, &client.SampleRequest{
		Prompt: "What's the weather like in Paris?",
		Model:  "offline/flaky",
		Tools:  []client.Tool{weather},
	})
	if err != nil {
		log.Fatal(err)
	}
	call := res.ToolCalls[0]
	fmt.Println(call.Name, "after", res.Attempts, "attempts; has a city:", call.Arguments.City != "")
	// Output: get_weather after 2 attempts; has a city: true
}

func ExampleValidationError() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	// offline/broken never answers with valid JSON: the attempts run out.
	_, err = client.SampleSchema[map[string]any](context.Background(), c, &client.SampleRequest{
		Prompt: "Anything.",
		Model:  "offline/broken",
	})
	var ve *client.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Method, ve.Attempts, ve.LastResult.Model, ve.Errors[0].Path)
	}
	// Output: sampleSchema 3 broken /
}

func ExampleProblem() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	_, err = c.Sample(context.Background(), &client.SampleRequest{Prompt: "Hi.", Model: "nobody/nothing"})
	var p *client.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Type)
		fmt.Println(p.Errors[0].Path)
	}
	// Output:
	// 400 https://sampled.dev/problems/invalid-request
	// /model
}

func ExampleClient_Messages() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}

	res, err := c.Messages(context.Background(), &client.CreateMessageParams{
		Messages:  []client.Message{client.UserMessage(client.TextContent("What is the capital of France?"))},
		MaxTokens: 100,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Role, res.StopReason)
	fmt.Println(res.Text())
	// Output:
	// assistant endTurn
	// [offline] You said: "What is the capital of France?"
}

func ExampleClient_Events() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	started, err := c.StartLoop(ctx, &client.LoopRequest{
		Prompt:       "Please calculate 2 * (3 + 4)",
		AllowedTools: []string{"std__calculate"},
	})
	if err != nil {
		log.Fatal(err)
	}
	// The iteration ends after loop.completed; a dropped connection is
	// resumed where it broke.
	for ev, err := range c.Events(ctx, started.ID) {
		if err != nil {
			log.Fatal(err)
		}
		switch d := ev.Data.(type) {
		case *client.ToolStartedData:
			fmt.Println(ev.ID, ev.Name, d.Name)
		case *client.LoopCompletedData:
			fmt.Println(ev.ID, ev.Name, d.Status)
		default:
			fmt.Println(ev.ID, ev.Name)
		}
	}
	// Output:
	// 1 loop.started
	// 2 model.completed
	// 3 tool.started std__calculate
	// 4 tool.completed
	// 5 iteration.completed
	// 6 model.completed
	// 7 iteration.completed
	// 8 loop.completed completed
}

func ExampleClient_Loop() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	started, err := c.StartLoop(ctx, &client.LoopRequest{Prompt: "Please calculate 2 * (3 + 4)", AllowedTools: []string{"std__calculate"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range c.Events(ctx, started.ID) { // wait for the end
		if err != nil {
			log.Fatal(err)
		}
	}
	run, err := c.Loop(ctx, started.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, run.Iterations, len(run.Messages))
	for _, m := range run.Messages {
		fmt.Println(m.Role, m.Content[0].Type)
	}
	// Output:
	// completed 2 4
	// user text
	// assistant tool_use
	// user tool_result
	// assistant text
}

func ExampleClient_CancelLoop() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	started, err := c.StartLoop(ctx, &client.LoopRequest{Prompt: "Please calculate 2 * (3 + 4)"})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range c.Events(ctx, started.ID) {
		if err != nil {
			log.Fatal(err)
		}
	}
	// An offline loop is over within a millisecond: too late to cancel.
	err = c.CancelLoop(ctx, started.ID)
	var p *client.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Title)
	}
	// Output: 409 Loop already finished
}

// ListLoops pages through the runs, newest first.
func ExampleClient_ListLoops() {
	url, stop := runSampled()
	defer stop()
	c, err := client.New(url)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, prompt := range []string{"Please calculate 1 + 1", "Please calculate 2 + 2", "Please calculate 3 + 3"} {
		started, err := c.StartLoop(ctx, &client.LoopRequest{Prompt: prompt, AllowedTools: []string{"std__calculate"}})
		if err != nil {
			log.Fatal(err)
		}
		for _, err := range c.Events(ctx, started.ID) { // wait for the end
			if err != nil {
				log.Fatal(err)
			}
		}
	}

	opts := &client.ListLoopsOptions{Status: client.LoopCompleted, Limit: 2}
	for pages := 1; ; pages++ {
		page, err := c.ListLoops(ctx, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, run := range page.Loops {
			fmt.Println("page", pages, run.Status, run.Result)
		}
		if page.Next == "" {
			break
		}
		opts.Cursor = page.Next
	}
	// Output:
	// page 1 completed [offline] Tool results: std__calculate → "6"
	// page 1 completed [offline] Tool results: std__calculate → "4"
	// page 2 completed [offline] Tool results: std__calculate → "2"
}
