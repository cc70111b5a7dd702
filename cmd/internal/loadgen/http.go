package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDrain bounds how much of a response body is read to let its
// connection be reused; a larger body costs a new connection, not memory.
const maxDrain = 64 << 10

var jsonContentType = []string{"application/json"}
var userAgentHeader = []string{userAgent}

type httpTransport struct {
	tr     *http.Transport
	hc     *http.Client
	url    string
	prefix []byte // the body up to the descriptor value or key suffix
	suffix []byte // the body after it
}

func newHTTP(p plan) (*httpTransport, error) {
	dialer := &net.Dialer{Timeout: p.Timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		// A benchmark must measure the target, not a proxy picked up from
		// the environment.
		Proxy:       nil,
		DialContext: dialer.DialContext,
		// Every worker keeps its connection between calls; the default of 2
		// idle connections per host would make most calls dial anew.
		MaxIdleConns:        p.Concurrency,
		MaxIdleConnsPerHost: p.Concurrency,
		// A worker whose connection is about to return to the pool would
		// otherwise dial a spare one; capping at one per worker makes it
		// wait the few microseconds instead.
		MaxConnsPerHost:       p.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   p.Timeout,
		ResponseHeaderTimeout: p.Timeout,
		// ForceAttemptHTTP2 stays off: over HTTPS too, one HTTP/1.1
		// connection per worker, so that Concurrency means the same number
		// of connections on both schemes.
	}
	t := &httpTransport{
		tr: tr,
		hc: &http.Client{
			Transport: tr,
			Timeout:   p.Timeout,
			// /v1/allow never redirects; following one would measure
			// something else, so a 3xx is reported as an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		url: p.url,
	}
	cost := strconv.FormatInt(p.Cost, 10)
	if p.limit != nil {
		lim, err := json.Marshal(p.limit)
		if err != nil {
			return nil, fmt.Errorf("loadgen: encoding limit: %w", err)
		}
		t.prefix = fmt.Appendf(nil, `{"key":"%s`, jsonInner(p.DescriptorKey+":"))
		t.suffix = fmt.Appendf(nil, `","limit":%s,"cost":%s}`, lim, cost)
	} else {
		t.prefix = fmt.Appendf(nil, `{"domain":"%s","descriptors":[{"entries":[{"key":"%s","value":"`,
			jsonInner(p.Domain), jsonInner(p.DescriptorKey))
		t.suffix = fmt.Appendf(nil, `"}]}],"cost":%s}`, cost)
	}
	return t, nil
}

// jsonInner is s as the inside of a JSON string literal, quotes stripped.
func jsonInner(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b[1 : len(b)-1])
}

func (t *httpTransport) client(int) client { return t }

func (t *httpTransport) close() { t.tr.CloseIdleConnections() }

// call is safe for concurrent use: every worker shares the transport.
func (t *httpTransport) call(ctx context.Context, key int) (bool, error) {
	// A fresh body per call: the transport may still be reading the previous
	// one after Do returns, so a reused buffer could be overwritten under it.
	body := make([]byte, 0, len(t.prefix)+20+len(t.suffix))
	body = append(body, t.prefix...)
	body = strconv.AppendInt(body, int64(key), 10)
	body = append(body, t.suffix...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header["Content-Type"] = jsonContentType
	req.Header["User-Agent"] = userAgentHeader
	resp, err := t.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusTooManyRequests:
		_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		if err != nil {
			return false, fmt.Errorf("reading the %d response: %w", resp.StatusCode, err)
		}
		return resp.StatusCode == http.StatusOK, nil
	default:
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		msg := fmt.Sprintf("POST %s: unexpected status %s", t.url, resp.Status)
		if s := strings.TrimSpace(string(snippet)); s != "" {
			msg += ": " + s
		}
		return false, fmt.Errorf("%s", msg)
	}
}
