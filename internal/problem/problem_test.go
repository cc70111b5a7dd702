package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"

	"github.com/floodgate-io/floodgate/internal/problem"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    problem.Details
		want map[string]any
	}{
		{"quota exceeded names the policies", problem.QuotaExceeded([]string{"per-ip", "per-key"}), map[string]any{
			"type": problem.QuotaExceededType, "title": problem.QuotaExceededTitle, "status": 429.0,
			"violated-policies": []any{"per-ip", "per-key"},
		}},
		{"overloaded is a 503 of its own type, not the quota's", problem.Overloaded("sheddable request shed"), map[string]any{
			"type": problem.OverloadedType, "title": problem.OverloadedTitle, "status": 503.0, "detail": "sheddable request shed",
		}},
		{"generic carries the status text and the detail", problem.Generic(http.StatusBadRequest, "missing header X-API-Key"), map[string]any{
			"type": "about:blank", "title": "Bad Request", "status": 400.0, "detail": "missing header X-API-Key",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			problem.Write(rec, tc.d)
			if rec.Code != tc.d.Status {
				t.Errorf("status %d, want %d", rec.Code, tc.d.Status)
			}
			h := rec.Header()
			if h.Get("Content-Type") != "application/problem+json" || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
				t.Errorf("header %v for a body of %d bytes", h, rec.Body.Len())
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body %v, want %v", got, tc.want)
			}
		})
	}
}
