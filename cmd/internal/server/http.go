package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// routes builds the HTTP listener's handler; operator adds /metrics,
// /admin and /debug/pprof/ (operatorRoutes), unless the admin listener
// serves them.
func (s *Server) routes(operator bool) http.Handler {
	mux := http.NewServeMux()
	route := func(path, method string, h http.HandlerFunc) {
		mux.Handle(path, onlyMethod(method, h))
	}
	route("/v1/allow", http.MethodPost, s.handleAllow)
	route("/v1/adjust", http.MethodPost, s.handleAdjust)
	route("/json", http.MethodPost, s.handleJSON)
	route("/healthz", http.MethodGet, s.handleHealthz)
	route("/readyz", http.MethodGet, s.handleReadyz)
	if operator {
		s.operatorRoutes(mux)
	} else {
		s.movedRoutes(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s", r.URL.Path))
	})
	return s.recoverer(mux)
}

// onlyMethod answers 405 with an Allow header to other methods (GET also
// takes HEAD).
func onlyMethod(method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			allow := method
			if method == http.MethodGet {
				allow += ", " + http.MethodHead
			}
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (want %s)", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	})
}

// recoverer turns a panic into a logged 500.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared as net/http does
				panic(v)
			}
			s.log.Error("server: panic serving HTTP", "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !tw.wrote {
				writeError(tw, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(tw, r)
	})
}

// trackingWriter records whether the header has been written.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *trackingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.wrote = true
		f.Flush()
	}
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// httpError is an answer other than success, with its message.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// errorBody is every error's JSON body.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: excerpt.Message(msg)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // every value written here marshals; be safe anyway
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	writeRaw(w, status, append(b, '\n'))
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// fail answers err, logging those that are the service's fault.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeError(w, he.status, he.msg)
		return
	}
	f := classify(err)
	if f.internal {
		s.log.Error("server: decision failed", "path", r.URL.Path, "error", err)
	}
	writeError(w, f.status, f.msg)
}

// readBody reads a request body of at most MaxBodyBytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body too large: over %d bytes", mbe.Limit)}
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return body, nil
}

// decodeJSON decodes one JSON object into v strictly: no unknown fields,
// nothing after it.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("empty request body: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("%s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON: unexpected data after the JSON object")
	}
	return nil
}

// jsonProblem names what is wrong with a body encoding/json refused.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at offset %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("the request must be a JSON object, not %s", typ.Value)
		}
		return fmt.Sprintf("field %q: want %s, got %s", typ.Field, jsonType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field") {
		return msg
	}
	return "malformed JSON: " + msg
}

func jsonType(kind string) string {
	switch kind {
	case "int64", "int", "uint32", "uint64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "ptr", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return kind
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", err)
		return
	}
	w.Write([]byte("ok\n"))
}
