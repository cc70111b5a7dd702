package cli

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/listen"
)

// tlsFlags are the listeners' TLS: --tls-cert, --tls-key and
// --tls-client-ca, one set for every listener of the command.
type tlsFlags struct{ files listen.TLSFiles }

func (f *tlsFlags) register(fl *pflag.FlagSet, isProxy bool) {
	listeners := "the HTTP and gRPC listeners (and --admin's)"
	if isProxy {
		listeners = "the HTTP listener"
	}
	fl.StringVar(&f.files.Cert, "tls-cert", "",
		"PEM certificate (with its chain) served over TLS 1.2+ on "+listeners+"; re-read when the file changes (default: plain text)")
	fl.StringVar(&f.files.Key, "tls-key", "", "PEM private key of --tls-cert; re-read when the file changes")
	clients := "on " + listeners
	if !isProxy {
		clients = "on the HTTP and gRPC listeners (not on --admin's, which its token guards)"
	}
	fl.StringVar(&f.files.ClientCA, "tls-client-ca", "",
		"PEM certificate authorities: require a client certificate one of them signed (mTLS) "+clients+"; needs --tls-cert")
}

// flagOf names the flag of each file LoadTLS can find at fault.
var flagOf = map[string]string{"certificate": "--tls-cert", "key": "--tls-key", "client CA": "--tls-client-ca"}

// load reads the files: nil when TLS is off, an error naming the flag
// and the file when one cannot serve.
func (f tlsFlags) load(log *slog.Logger) (*listen.TLS, error) {
	files := f.files
	switch {
	case files == listen.TLSFiles{}:
		return nil, nil
	case files.Cert == "" && files.Key == "":
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are asked for over TLS")
	case files.Key == "":
		return nil, fmt.Errorf("--tls-cert %s needs --tls-key, its private key", files.Cert)
	case files.Cert == "":
		return nil, fmt.Errorf("--tls-key %s needs --tls-cert, its certificate", files.Key)
	}
	t, err := listen.LoadTLS(files, log)
	if fe := (*listen.FileError)(nil); errors.As(err, &fe) {
		return nil, fmt.Errorf("%s: %w", flagOf[fe.What], err)
	}
	return t, err
}
