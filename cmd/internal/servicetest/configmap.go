package servicetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// ConfigMap is a directory laid out as the kubelet lays out a mounted
// Kubernetes ConfigMap: the data in a timestamped directory, "..data" a
// symbolic link to it, and each file a link through "..data". Update
// swaps in new data the kubelet's way, so that tests of file watching see
// the events a pod sees.
type ConfigMap struct {
	Dir     string
	tb      testing.TB
	version int
}

// NewConfigMap lays out files (name -> content) in a new temporary
// directory.
func NewConfigMap(tb testing.TB, files map[string]string) *ConfigMap {
	tb.Helper()
	c := &ConfigMap{Dir: tb.TempDir(), tb: tb}
	c.Update(files)
	for name := range files {
		c.must(os.Symlink(filepath.Join("..data", name), filepath.Join(c.Dir, name)))
	}
	return c
}

// Update writes the files into a new data directory, points a new link at
// it, renames the link over "..data" (the atomic step), and removes the
// old data directory.
func (c *ConfigMap) Update(files map[string]string) {
	c.tb.Helper()
	c.version++
	data := fmt.Sprintf("..2026_12_%02d_00_00_00.000000001", c.version)
	c.must(os.Mkdir(filepath.Join(c.Dir, data), 0o755))
	for name, content := range files {
		c.must(os.WriteFile(filepath.Join(c.Dir, data, name), []byte(content), 0o644))
	}
	c.must(os.Symlink(data, filepath.Join(c.Dir, "..data_tmp")))
	c.must(os.Rename(filepath.Join(c.Dir, "..data_tmp"), filepath.Join(c.Dir, "..data")))
	if c.version > 1 {
		c.must(os.RemoveAll(filepath.Join(c.Dir, fmt.Sprintf("..2026_12_%02d_00_00_00.000000001", c.version-1))))
	}
}

func (c *ConfigMap) must(err error) {
	c.tb.Helper()
	if err != nil {
		c.tb.Fatal(err)
	}
}
