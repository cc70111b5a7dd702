package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
)

func TestAdminAuth(t *testing.T) {
	h := newHarness(t, setup{})
	off := newHarness(t, setup{opts: func(o *server.Options) { o.AdminToken = "" }})
	for _, path := range []string{"/admin/policies", "/admin/reload", "/admin", "/admin/nope"} {
		for _, tc := range []struct {
			name   string
			h      *harness
			auth   string
			status int
		}{
			{"no token configured", off, "Bearer s3cret", 404},
			{"no token configured, none sent", off, "", 404},
			{"no header", h, "", 401},
			{"wrong token", h, "Bearer s3cre", 401},
			{"longer token", h, "Bearer s3cret!", 401},
			{"wrong scheme", h, "Basic s3cret", 401},
			{"empty bearer", h, "Bearer ", 401},
		} {
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			r := tc.h.do("GET", path, "", hdr...)
			if r.status != tc.status {
				t.Errorf("%s %s: %d %s", tc.name, path, r.status, r.body)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no WWW-Authenticate", tc.name)
			}
		}
	}
	if r := h.do("GET", "/admin/policies", "", "Authorization", "bearer s3cret"); r.status != 200 {
		t.Fatalf("right token, scheme in lower case: %d %s", r.status, r.body)
	}
	if r := h.admin("POST", "/admin/policies", ""); r.status != 405 {
		t.Fatalf("wrong method: %d", r.status)
	}
	if r := h.admin("GET", "/admin/nope", ""); r.status != 404 {
		t.Fatalf("unknown admin route: %d", r.status)
	}
}

func TestAdminPolicies(t *testing.T) {
	h := newHarness(t, setup{})
	r := h.admin("GET", "/admin/policies", "")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	body := string(r.body)
	for _, want := range []string{
		`"domain":"api","file":"policy.yaml"`,
		`{"path":"api.user","limit":{"algorithm":"fixed_window","rate":3,"period":"1m0s"},"counts":"units","file":"policy.yaml","line":5}`,
		`{"name":"burst","path":"api.tenant","limit":{"algorithm":"token_bucket","rate":2,"period":"1s","burst":4},"counts":"units","file":"policy.yaml","line":8}`,
		`{"name":"rpm","path":"api.api_key","limit":{"algorithm":"fixed_window","rate":3,"period":"1m0s"},"counts":"requests",`,
		`{"path":"api.path_/health","unlimited":true,"file":"policy.yaml","line":12}`,
		`"shadow_mode":true`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in %s", want, body)
		}
	}
}

func TestAdminResetInspectReload(t *testing.T) {
	h := newHarness(t, setup{})
	const explicit = `{"key":"user:42","limit":{"algorithm":"fixed_window","rate":5,"period":"1m"}}`
	for range 3 {
		h.post("/v1/allow", explicit)
		h.post("/v1/allow", lookup(0, "user", "ann"))
	}
	// Inspect reads without consuming.
	for range 2 {
		r := h.admin("POST", "/admin/inspect", explicit)
		want := `{"keys":[{"key":"explicit/user:42","name":"user:42","limit":{"algorithm":"fixed_window","rate":5,"period":"1m0s"},"capacity":5,"remaining":2,"reset_after_ms":60000}]}` + "\n"
		if r.status != 200 || string(r.body) != want {
			t.Fatalf("inspect: %d %s", r.status, r.body)
		}
	}
	r := h.admin("POST", "/admin/inspect", lookup(0, "user", "ann"))
	if r.status != 200 || !strings.Contains(string(r.body), `"key":"api/user=ann","name":"api.user"`) || !strings.Contains(string(r.body), `"remaining":0`) {
		t.Fatalf("inspect a lookup: %d %s", r.status, r.body)
	}

	for _, tc := range []struct{ body, key string }{
		{`{"explicit_key":"user:42"}`, "explicit/user:42"},
		{`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`, "api/user=ann"},
		{`{"key":"raw/key"}`, "raw/key"},
	} {
		r := h.admin("POST", "/admin/reset", tc.body)
		if r.status != 200 || !strings.Contains(string(r.body), `"reset":["`+tc.key+`"]`) {
			t.Fatalf("reset %s: %d %s", tc.body, r.status, r.body)
		}
		h.resetMu.Lock()
		last := h.resets[len(h.resets)-1]
		h.resetMu.Unlock()
		if last != tc.key {
			t.Fatalf("Reset got %q, want %q", last, tc.key)
		}
	}
	if m := h.post("/v1/allow", explicit).json(t); num(t, m, "remaining") != 4 {
		t.Fatalf("explicit key after reset: %v", m)
	}
	if m := h.post("/v1/allow", lookup(0, "user", "ann")).json(t); num(t, m, "remaining") != 2 {
		t.Fatalf("policy key after reset: %v", m)
	}
	for _, bad := range []string{`{}`, `{"key":"a","explicit_key":"b"}`, `{"domain":""}`, `{"keys":"a"}`} {
		if r := h.admin("POST", "/admin/reset", bad); r.status != 400 {
			t.Errorf("reset %s: %d %s", bad, r.status, r.body)
		}
	}

	r = h.admin("POST", "/admin/reload", "")
	if r.status != 200 || h.reloads.Load() != 1 || !strings.Contains(string(r.body), `"domains":["api"]`) {
		t.Fatalf("reload: %d %s (%d calls)", r.status, r.body, h.reloads.Load())
	}
}

func TestAdminWithoutHooks(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) {
		o.Reset, o.Limiter = nil, nil
		o.Reload = func() error { return errors.New("policy.yaml:3: broken") }
	}})
	if r := h.admin("POST", "/admin/reset", `{"key":"k"}`); r.status != http.StatusNotImplemented {
		t.Errorf("reset without Reset: %d", r.status)
	}
	if r := h.admin("POST", "/admin/inspect", `{"key":"k","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}}`); r.status != http.StatusNotImplemented {
		t.Errorf("inspect without Limiter: %d", r.status)
	}
	if r := h.admin("POST", "/admin/reload", ""); r.status != 500 || !strings.Contains(string(r.body), "policy.yaml:3: broken") {
		t.Errorf("failed reload: %d %s", r.status, r.body)
	}
	nilReload := newHarness(t, setup{opts: func(o *server.Options) { o.Reload = nil }})
	if r := nilReload.admin("POST", "/admin/reload", ""); r.status != http.StatusNotImplemented {
		t.Errorf("reload without Reload: %d", r.status)
	}
}

func TestAdminResetError(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) {
		o.Reset = func(context.Context, string) error { return errors.New("redis: connection refused") }
	}})
	r := h.admin("POST", "/admin/reset", `{"key":"k"}`)
	if r.status != 500 || !strings.Contains(string(r.body), "connection refused") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
