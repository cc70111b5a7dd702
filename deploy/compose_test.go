package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The quickstart's compose file, as far as this test reads it.
type composeFile struct {
	Services map[string]struct {
		Image   string   `json:"image"`
		Command []string `json:"command"`
		Volumes []string `json:"volumes"`
		Ports   []string `json:"ports"`
	} `json:"services"`
}

// Every file the compose file mounts exists, Floodgate reads the mounted
// policy and Redis, Envoy gets envoy.yaml, and the ports Envoy's cluster and
// the README use are published.
func TestComposeMountsWhatTheServicesRead(t *testing.T) {
	raw, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose/compose.yaml: %v", err)
	}
	mounts := map[string]map[string]string{} // service → target → source
	for name, s := range c.Services {
		mounts[name] = map[string]string{}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if _, err := os.Stat(filepath.Join("compose", parts[0])); err != nil {
				t.Errorf("service %s mounts %s: %v", name, parts[0], err)
			}
			mounts[name][parts[1]] = parts[0]
		}
	}
	fg := c.Services["floodgate"]
	args := strings.Join(fg.Command, " ")
	if !strings.Contains(args, "--config /etc/floodgate") || mounts["floodgate"]["/etc/floodgate"] != "./policy" {
		t.Errorf("floodgate: command %q and mounts %v; want --config /etc/floodgate with ./policy mounted there", args, mounts["floodgate"])
	}
	if !strings.Contains(args, "--redis redis:6379") || c.Services["redis"].Image == "" {
		t.Errorf("floodgate: command %q; want --redis redis:6379 and a redis service", args)
	}
	if !strings.Contains(strings.Join(fg.Ports, " "), "8081:8081") {
		t.Errorf("floodgate ports %v; want 8081 (gRPC) published", fg.Ports)
	}
	if mounts["envoy"]["/etc/envoy/envoy.yaml"] != "../envoy/envoy.yaml" {
		t.Errorf("envoy mounts %v; want ../envoy/envoy.yaml at /etc/envoy/envoy.yaml", mounts["envoy"])
	}
}
