package sampler

// Bounds on what a request may ask, checked before any costly work: a
// schema is compiled only within them.
const (
	// MaxSchemaBytes bounds the size of one JSON Schema.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaDepth bounds how deeply a JSON Schema nests, in JSON levels
	// (objects and arrays): {"properties":{"a":{}}} is 3 levels deep.
	MaxSchemaDepth = 64
	// MaxTokensLimit bounds maxTokens: no model writes more in one answer,
	// and a provider would refuse the request only after its upstream call.
	MaxTokensLimit = 1 << 20
	// MaxToolNameLen bounds a tool's name: the longest OpenAI and Anthropic
	// take (see ToolName).
	MaxToolNameLen = 64
)

// JSONDepth returns how deeply the JSON text b nests objects and arrays:
// 0 for a scalar, 1 for {} or [], and so on. It scans b once, skipping
// strings, and does not check that b is valid JSON.
func JSONDepth(b []byte) int {
	depth, most := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > most {
				most = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}
