package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
)

func serveRecorder(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}
