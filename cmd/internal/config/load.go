package config

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// ErrNoPolicy is what LoadFiles and Files.Parse wrap when the paths hold no
// policy file at all: an empty directory, or one without *.yaml or *.yml
// files. A service given such a path would enforce nothing, so it is an
// error; a caller that means to run without limits tells it apart with
// errors.Is and uses policy.NewSet().
var ErrNoPolicy = errors.New("no policy")

// LoadFiles parses files and directories into a Set. A directory
// contributes its *.yaml and *.yml files, not those of its subdirectories,
// nor hidden ones, in name order. Every file is parsed; the errors of all of
// them come back joined. Paths that hold no file at all are an error
// wrapping ErrNoPolicy.
func LoadFiles(paths ...string) (*policy.Set, error) {
	return ReadFiles(paths...).Parse()
}

// Files is the content of the policy files under some paths as read at one
// moment: what LoadFiles parses. Reading twice and comparing the digests
// tells files at rest from files being written.
type Files struct {
	paths []string
	files []file
	errs  []error // reading problems, reported by Parse with the parsing ones
}

type file struct {
	path     string
	resolved string // the path with every symbolic link followed; "" if that failed
	data     []byte
}

// ListFiles names the files LoadFiles reads under paths: each path that is
// not a directory, and the *.yaml and *.yml files of each one that is.
func ListFiles(paths ...string) ([]string, error) {
	var files []string
	var errs []error
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fileError(p, err))
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, fileError(p, err))
			continue
		}
		for _, e := range entries {
			name := e.Name()
			ext := strings.ToLower(filepath.Ext(name))
			if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			files = append(files, filepath.Join(p, name))
		}
	}
	return files, errors.Join(errs...)
}

// ReadFiles reads the files LoadFiles would. It does not fail: what could
// not be read is reported by Parse, together with what could not be parsed.
func ReadFiles(paths ...string) *Files {
	names, err := ListFiles(paths...)
	f := &Files{paths: paths}
	if err != nil {
		f.errs = append(f.errs, err)
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			f.errs = append(f.errs, fileError(name, err))
			continue
		}
		resolved, _ := filepath.EvalSymlinks(name)
		f.files = append(f.files, file{path: name, resolved: resolved, data: data})
	}
	return f
}

// Parse builds the Set of the files read.
func (f *Files) Parse() (*policy.Set, error) { return f.ParseWith(Options{}) }

// ParseWith builds the Set of the files read as o says.
func (f *Files) ParseWith(o Options) (*policy.Set, error) {
	errs := slices.Clone(f.errs)
	var policies []*policy.Policy
	if o.MergeDomains {
		var perrs []error
		policies, perrs = parseMerged(f.files)
		errs = append(errs, perrs...)
	} else {
		for _, file := range f.files {
			p, err := Parse(file.path, file.data)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			policies = append(policies, p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(policies) == 0 {
		for _, p := range f.paths {
			errs = append(errs, &Error{File: p, Msg: "no policy: no *.yaml or *.yml file to load", Err: ErrNoPolicy})
		}
		if len(errs) == 0 {
			errs = append(errs, &Error{File: "(no path)", Msg: "no policy: no file given", Err: ErrNoPolicy})
		}
		return nil, errors.Join(errs...)
	}
	return policy.NewSet(policies...)
}

// Digest identifies what was read: each file's path, where its symbolic
// links lead, its size and its bytes, and the reading errors. Two reads
// with the same digest found the same files with the same content.
func (f *Files) Digest() [sha256.Size]byte {
	h := sha256.New()
	field := func(b []byte) {
		h.Write(binary.AppendUvarint(nil, uint64(len(b))))
		h.Write(b)
	}
	for _, file := range f.files {
		field([]byte(file.path))
		field([]byte(file.resolved))
		field(file.data)
	}
	for _, err := range f.errs {
		field([]byte(err.Error()))
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// Dirs lists the directories the files read are in once symbolic links
// are followed, so that a watcher can see a change to a file that a link
// points to from elsewhere.
func (f *Files) Dirs() []string {
	var dirs []string
	for _, file := range f.files {
		if file.resolved != "" {
			dirs = append(dirs, filepath.Dir(file.resolved))
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

func fileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: path, Msg: "cannot read: " + msg, Err: err}
}
