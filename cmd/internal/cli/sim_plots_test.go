//go:build plots

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The experiments' --plot draws only in a build with -tags plots (see
// experiments.ErrNoPlots); .ci/run runs this file with it.

func TestSimExperimentsWritePlots(t *testing.T) {
	dir := t.TempDir()
	if _, err := runExperimentCmd(t, newSimBoundaryCmd, "--periods", "20", "--skews", "0s,100ms", "--plot", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := runExperimentCmd(t, newSimAccuracyCmd, "--requests", "100000", "--sources", "100", "--rate", "10", "--plot", dir, "--csv"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{boundaryPlotFile, skewPlotFile, accuracyPlotFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
}
