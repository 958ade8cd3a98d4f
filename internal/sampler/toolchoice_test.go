package sampler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func twoCalls(*Request) (*Response, error) {
	return &Response{Model: "m1", StopReason: StopToolUse, Content: []Content{
		TextBlock("Looking both up."),
		{Type: BlockToolUse, ID: "c1", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
		{Type: BlockToolUse, ID: "c2", Name: "get_weather", Input: json.RawMessage(`{"city":"Rome"}`)},
	}}, nil
}

const timeTool = `{"name":"get_time","inputSchema":{"type":"object","properties":{"zone":{"type":"string"}}}}`

// TestSampleEnforcesToolChoice checks that Sample in tools mode corrects an
// answer that breaks toolChoice or calls tools badly, and gives up with an
// *ExhaustedError (method sample) when the attempts run out.
func TestSampleEnforcesToolChoice(t *testing.T) {
	tests := []struct {
		name    string
		choice  *ToolChoice
		lenient bool
		replies []func(*Request) (*Response, error)
		// wantCalls are the names of the calls of the answer; nil with
		// wantExhausted.
		wantCalls     []string
		wantAttempts  int
		wantExhausted bool
		wantKinds     []string
		// wantCorrection is in the corrective turn sent with attempt 2.
		wantCorrection string
	}{
		{name: "auto text", replies: fns(text("sunny")), wantCalls: []string{}, wantAttempts: 1},
		{name: "auto valid call", replies: fns(call("get_weather", `{"city":"Paris"}`)), wantCalls: []string{"get_weather"}, wantAttempts: 1},
		{name: "auto unknown tool corrected", replies: fns(call("get_wether", `{"city":"Paris"}`), text("sunny")),
			wantCalls: []string{}, wantAttempts: 2, wantKinds: []string{KindUnknownTool}, wantCorrection: "unknown tool"},
		{name: "auto bad arguments corrected", replies: fns(call("get_weather", `{"town":"Paris"}`), call("get_weather", `{"city":"Paris"}`)),
			wantCalls: []string{"get_weather"}, wantAttempts: 2, wantKinds: []string{KindInvalidArguments}, wantCorrection: "/toolCalls/0/arguments"},
		{name: "none call corrected", choice: &ToolChoice{Mode: ToolChoiceNone}, replies: fns(call("get_weather", `{"city":"Paris"}`), text("sunny")),
			wantCalls: []string{}, wantAttempts: 2, wantKinds: []string{KindToolCallForbidden}, wantCorrection: "no tool may be called"},
		{name: "none exhausted", choice: &ToolChoice{Mode: ToolChoiceNone},
			replies:       fns(call("get_weather", `{"city":"Paris"}`), call("get_weather", `{"city":"Paris"}`), call("get_weather", `{"city":"Paris"}`)),
			wantExhausted: true, wantAttempts: 3, wantKinds: []string{KindToolCallForbidden, KindToolCallForbidden, KindToolCallForbidden}},
		{name: "required text corrected", choice: &ToolChoice{Mode: ToolChoiceRequired}, replies: fns(text("sunny"), call("get_weather", `{"city":"Paris"}`)),
			wantCalls: []string{"get_weather"}, wantAttempts: 2, wantKinds: []string{KindNoToolCall}, wantCorrection: "did not call a tool"},
		{name: "required exhausted", choice: &ToolChoice{Mode: ToolChoiceRequired}, replies: fns(text("a"), text("b"), text("c")),
			wantExhausted: true, wantAttempts: 3, wantKinds: []string{KindNoToolCall, KindNoToolCall, KindNoToolCall}},
		{name: "forced tool, other called", choice: &ToolChoice{Mode: ToolChoiceTool, Name: "get_time"},
			replies:   fns(call("get_weather", `{"city":"Paris"}`), call("get_time", `{}`)),
			wantCalls: []string{"get_time"}, wantAttempts: 2, wantKinds: []string{KindWrongTool}, wantCorrection: `requires tool \"get_time\"`},
		{name: "forced tool, text", choice: &ToolChoice{Mode: ToolChoiceTool, Name: "get_time"}, replies: fns(text("now"), call("get_time", `{}`)),
			wantCalls: []string{"get_time"}, wantAttempts: 2, wantKinds: []string{KindNoToolCall}, wantCorrection: `tool \"get_time\"`},
		{name: "parallel disabled keeps the first call", choice: &ToolChoice{Mode: ToolChoiceAuto, DisableParallelToolUse: true}, replies: fns(twoCalls),
			wantCalls: []string{"get_weather"}, wantAttempts: 1},
		{name: "parallel allowed", replies: fns(twoCalls), wantCalls: []string{"get_weather", "get_weather"}, wantAttempts: 1},
		{name: "lenient returns a bad call", lenient: true, choice: &ToolChoice{Mode: ToolChoiceNone}, replies: fns(call("get_wether", `{}`)),
			wantCalls: []string{"get_wether"}, wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.replies...)
			res, err := f.svc.Sample(context.Background(), &Params{Request: Request{Messages: userText("weather in Paris?"), MaxTokens: 50,
				Tools: tools(t, weatherTool, timeTool), ToolChoice: tt.choice}, LenientToolCalls: tt.lenient})
			if tt.wantExhausted {
				var ex *ExhaustedError
				if !errors.As(err, &ex) || ex.Method != MethodSample || ex.Attempts != tt.wantAttempts || ex.LastResult == nil || len(ex.Errors) == 0 {
					t.Fatalf("err = %v (%+v), want *ExhaustedError of sample after %d attempts", err, ex, tt.wantAttempts)
				}
				if o, _ := Outcome(context.Background(), nil, err); o != OutcomeExhausted {
					t.Errorf("outcome %q, want %q", o, OutcomeExhausted)
				}
				f.obs.check(t, "exhausted sample", 1)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, c := range res.ToolCalls {
					names = append(names, c.Name)
				}
				if names == nil {
					names = []string{}
				}
				if diff := cmp.Diff(tt.wantCalls, names); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
				if got := len(ToolCallsOf(res.Content)); got != len(tt.wantCalls) {
					t.Errorf("content holds %d tool_use blocks, want %d", got, len(tt.wantCalls))
				}
				if res.Attempts != tt.wantAttempts {
					t.Errorf("attempts %d, want %d", res.Attempts, tt.wantAttempts)
				}
				f.obs.check(t, "exhausted sample", 0)
			}
			if len(f.p.got) != tt.wantAttempts {
				t.Errorf("provider called %d times, want %d", len(f.p.got), tt.wantAttempts)
			}
			kinds := map[string]int{}
			for _, k := range tt.wantKinds {
				kinds[k]++
			}
			for k, n := range kinds {
				f.obs.check(t, "invalid sample "+k, n)
			}
			f.obs.check(t, "corrected sample", min(len(tt.wantKinds), 2))
			if tt.wantCorrection != "" {
				sent, _ := json.Marshal(f.p.got[1].Messages[2:])
				if !strings.Contains(string(sent), tt.wantCorrection) {
					t.Errorf("corrective turns %s lack %q", sent, tt.wantCorrection)
				}
			}
			for i, r := range f.p.got {
				if errs := checkRequest(&Params{Request: r}, f.svc.schemas); errs != nil {
					t.Errorf("attempt %d sent an invalid conversation: %v", i+1, errs)
				}
			}
		})
	}
}

func fns(f ...func(*Request) (*Response, error)) []func(*Request) (*Response, error) { return f }

// TestSampleToolsForcedTool checks that the guaranteed helper also holds a
// forced toolChoice.
func TestSampleToolsForcedTool(t *testing.T) {
	f := newFixture(t, call("get_weather", `{"city":"Paris"}`), call("get_time", `{"zone":"CET"}`))
	res, err := f.svc.SampleTools(context.Background(), &Params{Request: Request{Messages: userText("time?"), MaxTokens: 50,
		Tools: tools(t, weatherTool, timeTool), ToolChoice: &ToolChoice{Mode: ToolChoiceTool, Name: "get_time"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || res.ToolCalls[0].Name != "get_time" {
		t.Errorf("result %+v, want get_time after 2 attempts", res)
	}
	f.obs.check(t, "invalid sampleTools "+KindWrongTool, 1)
}

func TestCreateMessageResultContentShape(t *testing.T) {
	two := []Content{TextBlock("a"), TextBlock("b")}
	img := Content{Type: BlockImage, Data: "AA==", MIMEType: "image/png"}
	use := Content{Type: BlockToolUse, ID: "c1", Name: "get_weather", Input: json.RawMessage(`{}`)}
	tests := []struct {
		name string
		res  Result
		want []Content
	}{
		{"no tools, texts joined", Result{Content: two}, []Content{TextBlock("a\nb")}},
		{"no tools, text and image", Result{Content: []Content{img, TextBlock("a")}}, []Content{TextBlock("a")}},
		{"no tools, images", Result{Content: []Content{img, img}}, []Content{img}},
		{"no tools, empty", Result{}, []Content{TextBlock("")}},
		{"tools, blocks kept", Result{Content: append(append([]Content{}, two...), use), ToolCalls: ToolCallsOf([]Content{use})}, []Content{TextBlock("a"), TextBlock("b"), use}},
		{"tools, text only kept", Result{Content: two, ToolCalls: []ToolCall{}}, two},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CreateMessageResultOf(&tt.res)
			if diff := cmp.Diff(tt.want, got.Content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if single := strings.Contains(string(b), `"content":{`); single != (len(tt.want) == 1) {
				t.Errorf("encoded %s", b)
			}
		})
	}
}

// TestMessageKeepsOpenMembers checks that members MCP leaves open on a
// message (_meta, extensions) survive a round trip.
func TestMessageKeepsOpenMembers(t *testing.T) {
	in := `{"role":"user","content":{"type":"text","text":"hi","annotations":{"audience":["user"]},"_meta":{"k":1}},"_meta":{"trace":"t1"},"x-ext":{"a":[1,2]}}`
	var m Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(in), &want)
	_ = json.Unmarshal(out, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCreateMessageParamsExtensions checks that members the schema does not
// define are kept in Extra and written back, and that a member of the wrong
// type is named by its path.
func TestCreateMessageParamsExtensions(t *testing.T) {
	in := `{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxIterations":3,"allowedToolPatterns":["git__*"]}`
	var p CreateMessageParams
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]json.RawMessage{"maxIterations": json.RawMessage(`3`), "allowedToolPatterns": json.RawMessage(`["git__*"]`)}, p.Extra); diff != "" {
		t.Errorf("Extra (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(in), &want)
	_ = json.Unmarshal(out, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	for body, wantErr := range map[string]string{
		`{"tools":[{"name":"a","inputSchema":{"type":"object"},"description":5}]}`: "/tools/0/description: must be a string",
		`{"toolChoice":{"mode":"auto","disable_parallel_tool_use":"yes"}}`:         "/toolChoice/disable_parallel_tool_use: disable_parallel_tool_use must be a boolean",
		`{"modelPreferences":{"costPriority":"high"}}`:                             "/modelPreferences/costPriority: must be a number",
	} {
		var p CreateMessageParams
		err := json.Unmarshal([]byte(body), &p)
		if err == nil || err.Error() != wantErr {
			t.Errorf("%s: error %v, want %s", body, err, wantErr)
		}
	}
}

// TestToolChoiceNotAnObject: a toolChoice that is neither a string nor an
// object is a PathError about the value itself, which its holder places
// (/toolChoice in a body), and whose text is the message alone.
func TestToolChoiceNotAnObject(t *testing.T) {
	var tc ToolChoice
	err := json.Unmarshal([]byte(`5`), &tc)
	var pe *PathError
	if !errors.As(err, &pe) || pe.Path != "" || err.Error() != "toolChoice must be a string or an object with mode" {
		t.Errorf("error %v (%T), want a PathError about the value itself", err, err)
	}
}
