package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ioTimeout bounds every dial, read and write of the built-in client: a
// helper that hangs turns one failing test into a stuck CI job.
const ioTimeout = 5 * time.Second

// maxBulk rejects absurd lengths so a corrupt stream fails instead of
// allocating gigabytes; it matches Redis' own proto-max-bulk-len default.
const maxBulk = 512 << 20

// Kind is the RESP2 type of a Reply.
type Kind int

// Reply kinds. Nil covers both the null bulk string and the null array.
const (
	Simple Kind = iota
	Error
	Integer
	Bulk
	Array
	Nil
)

func (k Kind) String() string {
	switch k {
	case Simple:
		return "simple string"
	case Error:
		return "error"
	case Integer:
		return "integer"
	case Bulk:
		return "bulk string"
	case Array:
		return "array"
	case Nil:
		return "nil"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Reply is one parsed RESP2 reply.
type Reply struct {
	Kind  Kind
	Str   string  // Simple, Error and Bulk
	Int   int64   // Integer
	Elems []Reply // Array
}

// String renders the reply the way assertions want to compare it: strings
// and integers bare, nil as "(nil)", errors as "(error) MSG" and arrays as
// "[a b [c d]]".
func (r Reply) String() string {
	switch r.Kind {
	case Simple, Bulk:
		return r.Str
	case Error:
		return "(error) " + r.Str
	case Integer:
		return strconv.FormatInt(r.Int, 10)
	case Array:
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return "(nil)"
	}
}

// RedisError is an error reply from the server, such as "WRONGTYPE ..." or
// "MOVED 3999 127.0.0.1:7001".
type RedisError string

func (e RedisError) Error() string { return string(e) }

// roundTrip sends cmds over one fresh connection and returns the last reply;
// earlier commands (AUTH) must not fail. A connection per call keeps the
// helper free of shared state, which matters more than speed in tests.
func roundTrip(addr string, cmds ...[]string) (Reply, error) {
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return Reply{}, err
	}
	w := bufio.NewWriter(conn)
	for _, cmd := range cmds {
		writeCommand(w, cmd)
	}
	if err := w.Flush(); err != nil {
		return Reply{}, err
	}
	r := bufio.NewReader(conn)
	var last Reply
	for i := range cmds {
		last, err = readReply(r)
		if err != nil {
			return Reply{}, err
		}
		if last.Kind == Error {
			if i < len(cmds)-1 {
				return last, fmt.Errorf("%s: %w", cmds[i][0], RedisError(last.Str))
			}
			return last, RedisError(last.Str)
		}
	}
	return last, nil
}

// writeCommand encodes a command as a RESP array of bulk strings, the only
// form Redis accepts from clients besides inline commands. Errors surface at
// Flush.
func writeCommand(w *bufio.Writer, args []string) {
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
	}
}

func readReply(r *bufio.Reader) (Reply, error) {
	line, err := readLine(r)
	if err != nil {
		return Reply{}, err
	}
	if line == "" {
		return Reply{}, errors.New("resp: empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return Reply{Kind: Simple, Str: body}, nil
	case '-':
		return Reply{Kind: Error, Str: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return Reply{}, fmt.Errorf("resp: bad integer %q", body)
		}
		return Reply{Kind: Integer, Int: n}, nil
	case '$':
		return readBulk(r, body)
	case '*':
		return readArray(r, body)
	default:
		return Reply{}, fmt.Errorf("resp: unsupported reply type %q (only RESP2 is supported)", line[0])
	}
}

func readBulk(r *bufio.Reader, header string) (Reply, error) {
	n, err := readLength(header)
	if err != nil {
		return Reply{}, err
	}
	if n < 0 {
		return Reply{Kind: Nil}, nil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Reply{}, err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return Reply{}, errors.New("resp: bulk string not terminated by CRLF")
	}
	return Reply{Kind: Bulk, Str: string(buf[:n])}, nil
}

func readArray(r *bufio.Reader, header string) (Reply, error) {
	n, err := readLength(header)
	if err != nil {
		return Reply{}, err
	}
	if n < 0 {
		return Reply{Kind: Nil}, nil
	}
	elems := make([]Reply, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		e, err := readReply(r)
		if err != nil {
			return Reply{}, err
		}
		elems = append(elems, e)
	}
	return Reply{Kind: Array, Elems: elems}, nil
}

// readLength parses a bulk or array header; -1 is RESP2's null.
func readLength(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > maxBulk {
		return 0, fmt.Errorf("resp: bad length %q", s)
	}
	return n, nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("resp: line %q not terminated by CRLF", line)
	}
	return line[:len(line)-2], nil
}

// Send runs one command on whatever listens at addr (a proxy in front of a
// server, say) over a fresh connection and returns the parsed reply; an
// error reply is returned both as the Reply and as a RedisError.
func Send(addr string, args ...string) (Reply, error) {
	return roundTrip(addr, args)
}
