package tools

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestEventFilter: an event stream passes the filter unchanged, read a
// byte at a time, except the data of a sampling request whose params
// go-sdk cannot decode: that request's params become the stub naming the
// problem, and the event keeps its other fields.
func TestEventFilter(t *testing.T) {
	const (
		response = `{"jsonrpc":"2.0","id":1,"result":{}}`
		good     = `{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`
		bad      = `{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":"x"}}`
	)
	long := `"sampling/createMessage` + strings.Repeat("x", 10000) + `"`
	split := strings.Index(bad, `"method"`)
	tests := []struct {
		name, in string
		fields   string // of the rewritten event, without its data; "" when the stream passes unchanged
		want     string // the -32602 message the stub carries
	}{
		{"response", "id: 1\ndata: " + response + "\n\n", "", ""},
		{"well-formed request", "event: message\ndata: " + good + "\n\n", "", ""},
		{"comment and a long line", ": hi\ndata: " + long + "\n\n" + "data: " + response + "\n\n", "", ""},
		{"unterminated", "data: " + bad, "", ""},
		{"undecodable params", "id: 7\r\nevent: message\r\ndata: " + bad + "\r\n\r\n", "id: 7\r\nevent: message\r\n",
			"invalid params: /maxTokens: maxTokens must be an integer"},
		{"data in two lines", "data: " + bad[:split] + "\ndata:" + bad[split:] + "\n\n", "",
			"invalid params: /maxTokens: maxTokens must be an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &eventFilter{ReadCloser: io.NopCloser(nil), r: bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(tt.in)), 16)}
			got, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if string(got) != tt.in {
					t.Errorf("got %q, want it unchanged", got)
				}
				return
			}
			fields, data, ok := bytes.Cut(got, []byte("data: "))
			if !ok || string(fields) != tt.fields || !bytes.HasSuffix(data, []byte("\n\n")) {
				t.Fatalf("got %q, want the fields %q and one data line", got, tt.fields)
			}
			msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(data))
			if err != nil {
				t.Fatal(err)
			}
			req, ok := msg.(*jsonrpc.Request)
			var params struct {
				Meta map[string]string `json:"_meta"`
			}
			if !ok || req.ID.Raw() != int64(7) || json.Unmarshal(req.Params, &params) != nil || params.Meta[metaInvalid] != tt.want {
				t.Errorf("data %s, want request 7 with %s %q", data, metaInvalid, tt.want)
			}
		})
	}
}
