package proxy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file drives the tools of the proxy benchmark (bench_test.go): wrk,
// the load generator, and nginx, the trivial upstream and the reference
// limit_req proxy.

// wrkResult is what one wrk run measured.
type wrkResult struct {
	Requests int64         // completed in the run
	Non2xx   int64         // of them, answered other than 2xx or 3xx
	Seconds  float64       // the run's length as wrk measured it
	RPS      float64       // Requests/sec
	P99      time.Duration // 99th percentile latency (needs --latency)
}

// Admitted is the requests answered 2xx or 3xx.
func (r wrkResult) Admitted() int64 { return r.Requests - r.Non2xx }

var (
	wrkTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in ([\d.]+)(us|ms|s|m),`)
	wrkNon2xx  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([\d.]+)`)
	wrkP99     = regexp.MustCompile(`(?m)^\s*99%\s+([\d.]+)(us|ms|s|m)\s*$`)
	wrkUnitDur = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}
)

// parseWrk reads wrk's report; it fails on a report without the totals.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkTotal.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no request count in wrk's output:\n%s", out)
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.Seconds = duration(m[2], m[3]).Seconds()
	if m := wrkRPS.FindStringSubmatch(out); m != nil {
		r.RPS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := wrkP99.FindStringSubmatch(out); m != nil {
		r.P99 = duration(m[1], m[2])
	}
	return r, nil
}

func duration(n, unit string) time.Duration {
	f, _ := strconv.ParseFloat(n, 64)
	return time.Duration(f * float64(wrkUnitDur[unit])).Round(time.Microsecond)
}

// runWrk loads url with wrk for d.
func runWrk(t *testing.T, url string, threads, conns int, d time.Duration) wrkResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	args := []string{"-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", url}
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// nginxSetup is what the benchmark asks of nginx.
type nginxSetup struct {
	upstreamPort int            // a trivial upstream: 200 "hello"
	countedPort  int            // the same, logging each request's time to PREFIX/admitted.log
	zones        []string       // limit_req_zone directives
	limited      map[int]string // port -> the limit_req directive of a proxy to the counted upstream
}

// conf renders the configuration startNginx runs.
func (s nginxSetup) conf() string {
	var b strings.Builder
	fmt.Fprintf(&b, `daemon off;
worker_processes auto;
pid PREFIX/nginx.pid;
error_log PREFIX/error.log error;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path PREFIX/client_body;
    proxy_temp_path PREFIX/proxy;
    fastcgi_temp_path PREFIX/fastcgi;
    uwsgi_temp_path PREFIX/uwsgi;
    scgi_temp_path PREFIX/scgi;
    keepalive_requests 1000000;
    log_format stamp '$msec';
    upstream counted { server 127.0.0.1:%[2]d; keepalive 512; }
    server {
        listen 127.0.0.1:%[1]d;
        location / { return 200 "hello\n"; }
    }
    server {
        listen 127.0.0.1:%[2]d;
        access_log PREFIX/admitted.log stamp;
        location / { return 200 "hello\n"; }
    }
`, s.upstreamPort, s.countedPort)
	for _, z := range s.zones {
		fmt.Fprintf(&b, "    %s\n", z)
	}
	for port, limit := range s.limited {
		fmt.Fprintf(&b, `    server {
        listen 127.0.0.1:%d;
        location / {
            %s
            limit_req_status 429;
            limit_req_log_level info;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://counted;
        }
    }
`, port, limit)
	}
	b.WriteString("}\n")
	return b.String()
}

// ports lists every port the setup listens on.
func (s nginxSetup) ports() []int {
	out := []int{s.upstreamPort, s.countedPort}
	for p := range s.limited {
		out = append(out, p)
	}
	return out
}

// admittedPerSecond reads the counted upstream's log: how many requests it
// served in each whole second after start, for the seconds fully before
// end. The first second holds the burst; the rest are the steady rate.
func admittedPerSecond(log []byte, start, end time.Time) []int {
	n := int(end.Sub(start) / time.Second)
	out := make([]int, max(n, 0))
	for _, line := range strings.Fields(string(log)) {
		sec, err := strconv.ParseFloat(line, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, int64(sec*1e9))
		if i := int(at.Sub(start) / time.Second); !at.Before(start) && i < n {
			out[i]++
		}
	}
	return out
}

// startNginx runs nginx for setup until the test ends, and waits until it
// listens. It returns nginx's prefix directory, and skips the test when
// nginx is not installed.
func startNginx(t *testing.T, setup nginxSetup) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not found; apt-get install -y nginx")
		}
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // workers may run as another user
	conf := strings.ReplaceAll(setup.conf(), "PREFIX", dir)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // fast shutdown: the master stops its workers
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its own process group
			<-exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range setup.ports() {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
				t.Fatalf("nginx exited: %s\n%s", out, log)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("nginx did not listen on %d", port)
			}
		}
	}
	return dir
}
