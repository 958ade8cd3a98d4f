package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kaptinlin/jsonpointer"

	"github.com/sampled/sampled/internal/sampler"
)

// maxBodyDepth bounds how deeply a request body nests JSON objects and
// arrays.
const maxBodyDepth = sampler.MaxSchemaDepth + 16

// readBody reads a request's body: at most maxBody bytes, within the body
// timeout, in no content coding and, when the Content-Type names a
// charset, in UTF-8. The sampling routes read it before they take a place
// of the in-flight cap (limitSampling): a slow sender holds no place.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if rb, ok := r.Body.(*bodyBytes); ok {
		return rb.b, nil // read and checked already, by limitSampling
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		w.Header().Set("Accept-Encoding", "identity")
		return nil, unsupported(fmt.Sprintf("the body is in content coding %q; send it uncompressed", ce))
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		mt, params, err := mime.ParseMediaType(ct)
		switch cs := params["charset"]; {
		case err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")):
			return nil, unsupported("send the body as application/json")
		case cs != "" && !strings.EqualFold(cs, "utf-8"):
			return nil, unsupported(fmt.Sprintf("the body is in charset %q; send it in UTF-8", cs))
		}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) // a writer without deadlines (a test's) reads without
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		// net/http reads on, to see the client go away: past the
		// deadline, that read would cancel the request.
		_ = rc.SetReadDeadline(time.Time{})
		return body, nil
	case errors.As(err, &mbe):
		return nil, &bodyError{status: http.StatusRequestEntityTooLarge, slug: "body-too-large", title: "Request body too large",
			detail: fmt.Sprintf("the body exceeds %d bytes", s.maxBody)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &bodyError{status: http.StatusRequestTimeout, slug: "request-timeout", title: "Request body timed out",
			detail: fmt.Sprintf("the body did not arrive within %s", s.bodyTimeout)}
	}
	return nil, fmt.Errorf("read body: %w", err)
}

// bodyBytes is a body that has been read (readBody): its bytes, as a body
// again.
type bodyBytes struct {
	bytes.Reader
	b []byte
}

func newBodyBytes(b []byte) *bodyBytes {
	rb := &bodyBytes{b: b}
	rb.Reset(b)
	return rb
}

func (*bodyBytes) Close() error { return nil }

func unsupported(detail string) error {
	return &bodyError{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type", title: "Unsupported media type", detail: detail}
}

// decodeBody reads a JSON body (readBody) into dst. With strict set,
// unknown members are errors; the nested MCP objects that decode
// themselves stay open, as MCP leaves them.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, strict bool) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, dst, strict)
}

// decodeJSON decodes a body read by readBody into dst, as decodeBody does.
func decodeJSON(body []byte, dst any, strict bool) error {
	if at := invalidUTF8(body); at >= 0 {
		// encoding/json would read the byte as U+FFFD, silently.
		return badJSON("/", fmt.Sprintf("the body is not valid UTF-8 (at byte %d, 0x%02x)", at, body[at]))
	}
	// encoding/json allows 10000 levels; a body has no use for more than
	// a schema's (sampler.MaxSchemaDepth) and a few of its own.
	if d := sampler.JSONDepth(body); d > maxBodyDepth {
		return badJSON("/", fmt.Sprintf("the body nests %d levels deep; the limit is %d", d, maxBodyDepth))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badJSON("/", "the body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		var inv *sampler.InvalidError
		if errors.As(err, &inv) {
			return inv
		}
		fe := fieldError("", err)
		return badJSON(fe.Path, fe.Message)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badJSON("/", "the body holds more than one JSON value")
	}
	return nil
}

// invalidUTF8 is the offset of the first byte of b that is not part of a
// UTF-8 character, or -1 when there is none.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	at := 0
	for {
		r, n := utf8.DecodeRune(b[at:])
		if r == utf8.RuneError && n == 1 {
			return at
		}
		at += n
	}
}

// decodeAt decodes raw, the member of a body at the JSON Pointer path,
// into dst; errors name their paths from the body's root. A member that
// decodes itself is decoded so: encoding/json does not say where the
// errors of a type's own UnmarshalJSON are.
func decodeAt(path string, raw json.RawMessage, dst any) []sampler.FieldError {
	if raw == nil {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return []sampler.FieldError{fieldError(path, err)}
	}
	return nil
}

// decodeItems decodes each element of a JSON array member on its own, so
// that errors name the element: /tools/2/name.
func decodeItems[T any](member string, raw []json.RawMessage) ([]T, []sampler.FieldError) {
	if raw == nil {
		return nil, nil
	}
	out := make([]T, len(raw))
	var errs []sampler.FieldError
	for i, item := range raw {
		errs = append(errs, decodeAt(fmt.Sprintf("/%s/%d", member, i), item, &out[i])...)
	}
	return out, errs
}

func badJSON(path, msg string) error {
	return &bodyError{status: http.StatusBadRequest, slug: "invalid-request", title: "Invalid request",
		detail: path + ": " + msg, errors: []sampler.FieldError{{Path: path, Message: msg}}}
}

// unknownField starts the text of encoding/json's error for a member that
// DisallowUnknownFields refuses; the member's quoted name follows.
const unknownField = "json: unknown field "

// fieldError says what failed in err, an error of encoding/json or of a
// type's own UnmarshalJSON (a sampler.PathError), in JSON's terms and at
// its JSON Pointer; base is the pointer of the value that was decoded.
func fieldError(base string, err error) sampler.FieldError {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		pe  *sampler.PathError
	)
	at := func(path, format string, args ...any) sampler.FieldError {
		if path == "" {
			path = "/"
		}
		return sampler.FieldError{Path: path, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case errors.As(err, &pe):
		return at(base+pe.Path, "%s", pe.Message)
	case errors.As(err, &typ):
		var path string
		if typ.Field != "" {
			path = "/" + strings.ReplaceAll(typ.Field, ".", "/")
		}
		return at(base+path, "must be %s, not %s", sampler.JSONKind(typ.Type), typ.Value)
	case errors.As(err, &syn):
		return at(base, "not valid JSON (at byte %d)", syn.Offset)
	}
	// Only a body's own members can be unknown: the nested objects that
	// decode themselves are open.
	if name, ok := strings.CutPrefix(err.Error(), unknownField); ok {
		if n, err := strconv.Unquote(name); err == nil {
			return at(base+"/"+jsonpointer.EscapeToken(n), "unknown member %q", n)
		}
	}
	return at(base, "%s", err.Error())
}
